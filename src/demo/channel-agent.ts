import { decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import OpenAI from 'openai';
import type { Hex, PublicClient } from 'viem';
import { checkLedger } from '../ledger/invariants.ts';
import { microToUsd } from '../ledger/usd.ts';
import { auditCreditsOnChain } from '../payments/audit.ts';
import { claimChannelsNow } from './channel-claim.ts';
import { expect } from './demo-step.ts';
import type { Printer } from './printer.ts';
import { DEMO_EMBEDDING_MODEL, DEMO_MODEL, type DemoStack } from './stack.ts';

const REQUESTS = 20;
const AGENT_USDC = 10_000_000n;
const DEPOSIT_USDC = 1_000_000;

type Kind = 'chat' | 'stream' | 'embedding';
/** Two JSON chats, a streamed chat and an embedding, over and over. */
const kindOf = (i: number): Kind => (['chat', 'chat', 'stream', 'embedding'] as const)[i % 4]!;

/**
 * An agent with only a wallet and the stock clients (`@x402/fetch` with `@x402/evm`'s
 * batch-settlement scheme under the openai SDK, no key, no Tollgate code) pays per token through a
 * channel: one deposit, twenty vouchers, a claim and settle, and a cooperative refund of the rest;
 * then its money on chain is checked against the ledger, and the gas against `exact`, whose one
 * transferWithAuthorization per request the walk-through's top-up (`exactTx`) measured.
 */
export async function channelAgent(stack: DemoStack, print: Printer, exactTx: string | null): Promise<void> {
  const { chain, gateway } = stack;
  const db = gateway.services.storage.db;
  const agent = await chain.newAccount({ usdc: AGENT_USDC });
  const reader = chain.client(agent) as unknown as PublicClient;
  const payToBefore = await chain.balanceOf(chain.usdc, stack.payTo.address);
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(agent, reader));
  const usdcChannel = (_version: number, accepts: PaymentRequirements[]) =>
    accepts.find((r) => r.scheme === 'batch-settlement' && r.asset.toLowerCase() === chain.usdc.toLowerCase()) ?? accepts[0]!;
  const client = new x402Client(usdcChannel).register('eip155:*', scheme);
  client.setSpendControls({ allowedAssets: [{ network: chain.network, asset: chain.usdc, maxAmountPerPayment: String(DEPOSIT_USDC) }] });
  const openai = new OpenAI({
    baseURL: `${gateway.url}/v1`,
    apiKey: 'unused',
    defaultHeaders: { Authorization: null },
    fetch: wrapFetchWithPayment(fetch, client),
    maxRetries: 0,
  });

  print.title('A channel agent: twenty requests paid per token with x402 batch-settlement, no key, no transaction per request');
  let s = print.step(`POST /v1/chat/completions with no key: a new wallet (${microToUsd(Number(AGENT_USDC))} USDC) deposits into a channel`);
  const first = await openai.chat.completions
    .create({ model: DEMO_MODEL, messages: [{ role: 'user', content: 'Open a channel.' }], max_tokens: 100 })
    .withResponse();
  const opened = decodePaymentResponseHeader(first.response.headers.get('payment-response') ?? '');
  const channel = await db.selectFrom('channels').selectAll().where('payer', '=', agent.address.toLowerCase()).executeTakeFirst();
  expect(opened.success && Boolean(opened.transaction) && channel !== undefined, 'the first request did not open a channel with a deposit');
  const charges = [Number(first.response.headers.get('x-tollgate-charged-usdc'))];
  s.ok(
    `agent ${agent.address}; channel ${channel!.channel_id}\ndeposit $${microToUsd(DEPOSIT_USDC)} in ${opened.transaction}; charged ${charges[0]} micro-USDC`,
  );

  s = print.step(`${REQUESTS - 1} more requests (chat, streamed chat, embeddings): one signed voucher each`);
  for (let i = 1; i < REQUESTS; i++) charges.push(await request(openai, kindOf(i), i));
  const charged = charges.reduce((a, b) => a + b, 0);
  const served = await db.selectFrom('channels').selectAll().where('channel_id', '=', channel!.channel_id).executeTakeFirstOrThrow();
  expect(charges.every((c) => c > 0) && served.charged_usdc === charged, `the channel was charged ${served.charged_usdc}, the answers say ${charged}`);
  expect(served.deposited_usdc === DEPOSIT_USDC, 'the requests made another deposit');
  const counts = (['chat', 'stream', 'embedding'] as const).map((k) => `${charges.filter((_, i) => kindOf(i) === k).length} ${k}`).join(', ');
  s.ok(`${counts}; charged (micro-USDC) ${charges.join(' ')} = ${charged} in all, no transaction`);

  s = print.step('claim and settle now: one pass of the claimer, as `tollgate admin channels --claim` runs it');
  const pass = await claimChannelsNow(gateway);
  expect(pass.ran && pass.claims.length === 1 && pass.settles.length === 1 && pass.failures.length === 0, `the claim pass: ${JSON.stringify(pass)}`);
  s.ok(`claimed ${charged} micro-USDC in ${pass.claims[0]!.transaction}\nsettled to the receiver in ${pass.settles[0]}`);

  s = print.step("GET /v1/channels/refund: the agent takes back what it did not spend (the stock client's refund)");
  const refund = await scheme.refund(`${gateway.url}/v1/channels/refund`);
  expect(refund.success && refund.amount === String(DEPOSIT_USDC - charged), `refunded ${refund.amount}, expected ${DEPOSIT_USDC - charged}`);
  s.ok(`refunded $${microToUsd(DEPOSIT_USDC - charged)} in ${refund.transaction}`);

  s = print.step("channel check: the agent's money on chain against the ledger, and the gas against `exact`");
  const after = await db.selectFrom('channels').selectAll().where('channel_id', '=', channel!.channel_id).executeTakeFirstOrThrow();
  const spent = AGENT_USDC - (await chain.balanceOf(chain.usdc, agent.address));
  const received = (await chain.balanceOf(chain.usdc, stack.payTo.address)) - payToBefore;
  expect(spent === BigInt(charged) && received === BigInt(charged), `the agent paid ${spent} and payTo received ${received} on chain, ${charged} were charged`);
  expect(
    // The contract's balance keeps what was claimed until it is settled out of it: nothing else is left.
    after.total_claimed_usdc === charged && after.refunded_usdc === DEPOSIT_USDC - charged && after.balance_usdc === after.total_claimed_usdc,
    `the channel's record: ${JSON.stringify(after)}`,
  );
  const [ledger, audit] = [await checkLedger(db), await auditCreditsOnChain(db, () => reader)];
  expect(ledger.ok && audit.problems.length === 0, `ledger-check --chain:\n${[...ledger.problems, ...audit.problems].join('\n')}`);
  expect((await reader.getTransactionCount({ address: agent.address })) === 0, 'the agent sent a transaction itself');
  const sessionTxs = [opened.transaction, pass.claims[0]!.transaction, pass.settles[0]!, refund.transaction];
  const gas = await Promise.all(sessionTxs.map((tx) => gasOf(reader, tx)));
  const sessionGas = gas.reduce((a, b) => a + b, 0n);
  expect(exactTx !== null, 'the top-up named no transaction to measure `exact` by');
  const exactGas = await gasOf(reader, exactTx!);
  s.ok(
    [
      `the agent paid ${microToUsd(charged)} USDC on chain = charged; payTo received it`,
      `deposited $${microToUsd(DEPOSIT_USDC)} = claimed $${microToUsd(after.total_claimed_usdc)} + refunded $${microToUsd(after.refunded_usdc)}`,
      'ledger check and its on-chain audit clean',
      `gas: deposit ${gas[0]} + claim ${gas[1]} + settle ${gas[2]} + refund ${gas[3]} = ${sessionGas} for ${REQUESTS} requests (the agent sent none)`,
      `exact: ${exactGas} a request (a transferWithAuthorization, as the top-up's) = ${exactGas * BigInt(REQUESTS)} for ${REQUESTS}`,
    ].join('\n'),
  );
}

/** One request of the session; its charge as the answer states it (a stream: in its usage chunk). */
async function request(openai: OpenAI, kind: Kind, i: number): Promise<number> {
  if (kind === 'embedding') {
    const { response } = await openai.embeddings.create({ model: DEMO_EMBEDDING_MODEL, input: [`input ${i}`] }).withResponse();
    return Number(response.headers.get('x-tollgate-charged-usdc'));
  }
  const body = { model: DEMO_MODEL, messages: [{ role: 'user' as const, content: `Request ${i}.` }], max_tokens: 100 };
  if (kind === 'chat') {
    const { response } = await openai.chat.completions.create(body).withResponse();
    return Number(response.headers.get('x-tollgate-charged-usdc'));
  }
  const stream = await openai.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
  let charged = 0;
  for await (const chunk of stream) charged = (chunk.usage as { charged_usdc?: number } | undefined)?.charged_usdc ?? charged;
  return charged;
}

const gasOf = async (reader: PublicClient, tx: string) => (await reader.getTransactionReceipt({ hash: tx as Hex })).gasUsed;
