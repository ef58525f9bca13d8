import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import OpenAI from 'openai';
import { erc20Abi } from 'viem';
import { PERMIT2_ADDRESS } from '@x402/evm';
import type { PaymentRequirements } from '@x402/core/types';
import type { FundedAccount } from '../../src/devchain/deploy.ts';
import type { PaymentRow } from '../../src/payments/payment-row.ts';
import { uptoHoldWallet } from '../../src/payments/upto/upto-store.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { payPerRequestSuite, type PayPerRequestHarness } from './pay-per-request-harness.ts';
import { until } from './until.ts';
import { v2Header } from './x402-payloads.ts';
import type { Engine } from '../../src/storage/database.ts';

/**
 * Pay-per-request with x402 `upto` on (payPerRequest.upto), paid by the stock clients: `@x402/fetch`
 * with `new x402Client().register('eip155:*', new UptoEvmScheme(signer))` (docs/DECISIONS.md: the
 * package has no register helper for upto), under the stock `openai` SDK. Like the exact clients
 * of topup-harness.ts, it must be told the dev chain's token (`spendControls.allowedAssets`).
 */
export function uptoSuite(engine: Engine, config: Record<string, unknown> = {}): () => PayPerRequestHarness {
  return payPerRequestSuite(engine, { config: { payPerRequest: { enabled: true, upto: true }, ...config } });
}

export function uptoClient(h: PayPerRequestHarness, account: FundedAccount): x402Client {
  const client = new x402Client().register('eip155:*', new UptoEvmScheme(account));
  client.setSpendControls({ allowedAssets: [{ network: h.chain.network, asset: h.chain.usdt, maxAmountPerPayment: '10000000000' }] });
  return client;
}

export function uptoOpenAI(h: PayPerRequestHarness, account: FundedAccount): OpenAI {
  const fetchPaying = wrapFetchWithPayment(fetch, uptoClient(h, account)) as typeof fetch;
  return new OpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: 'unused', defaultHeaders: { Authorization: null }, fetch: fetchPaying, maxRetries: 0 });
}

/** A payer holding USDT that approved Permit2 once, as the upto scheme needs. */
export async function uptoPayer(h: PayPerRequestHarness): Promise<FundedAccount> {
  const payer = await h.payer(10n);
  await h.chain.approvePermit2(payer, h.chain.usdt);
  return payer;
}

/** The payer takes back Permit2's allowance (what an attacker does between the answer and the settle). */
export async function revokePermit2(h: PayPerRequestHarness, payer: FundedAccount): Promise<void> {
  const wallet = h.chain.client(payer);
  const hash = await wallet.writeContract({
    address: h.chain.usdt,
    abi: erc20Abi,
    functionName: 'approve',
    args: [PERMIT2_ADDRESS, 0n],
    account: payer,
    chain: wallet.chain,
  });
  await wallet.waitForTransactionReceipt({ hash });
}

export const uptoOffersOf = (accepts: PaymentRequirements[]) => accepts.filter((r) => r.scheme === 'upto');

/** The payer's upto payments, oldest first. */
export function uptoPayments(h: PayPerRequestHarness, payer: FundedAccount): Promise<PaymentRow[]> {
  return h.gw.services.storage.db
    .selectFrom('payments')
    .selectAll()
    .where('payer', '=', payer.address.toLowerCase())
    .where('upto_state', 'is not', null)
    .orderBy('created_at')
    .execute();
}

/** Waits until the payer's last upto payment has left holding/settling (its settle runs after the answer). */
export async function settledUpto(h: PayPerRequestHarness, payer: FundedAccount): Promise<PaymentRow> {
  let last: PaymentRow | undefined;
  await until(
    async () => {
      last = (await uptoPayments(h, payer)).at(-1);
      return last !== undefined && last.upto_state !== 'holding' && last.upto_state !== 'settling';
    },
    'the upto payment leaves holding and settling',
    20_000,
  );
  return last!;
}

export async function holdBalance(h: PayPerRequestHarness, payer: FundedAccount) {
  return getBalance(h.gw.services.storage.db, uptoHoldWallet(payer.address));
}

/** A payment header the stock upto client signs for `body`'s 402 (its upto entry, or `over` it), for raw requests. */
export async function signedUptoHeader(
  h: PayPerRequestHarness,
  payer: FundedAccount,
  body: unknown,
  over: Partial<PaymentRequirements> = {},
): Promise<{ header: string; offer: PaymentRequirements }> {
  const asked = await h.chat(body);
  const offer = { ...uptoOffersOf(asked.body.accepts as PaymentRequirements[])[0]!, ...over };
  const signed = await uptoClient(h, payer).createPaymentPayload({ x402Version: 2, resource: asked.body.resource, accepts: [offer] });
  return { header: v2Header(offer, signed.payload), offer };
}

/** A small chat request, the body of the upto tests. */
export const UPTO_BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

/** Streams one upto request for `body` and, after its first chunk (its maximum held, its charge not yet settled), runs `meanwhile`. */
export async function streamThen(h: PayPerRequestHarness, payer: FundedAccount, body: typeof UPTO_BODY, meanwhile: () => Promise<void>): Promise<string> {
  h.fake.behaviour = { chunkDelayMs: 50 };
  let text = '';
  try {
    const stream = await uptoOpenAI(h, payer).chat.completions.create({ ...body, stream: true });
    let done = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      if (!done && text) {
        done = true;
        await meanwhile();
      }
    }
  } finally {
    h.fake.behaviour = {};
  }
  return text;
}

/** Streams one upto request, revoking the payer's Permit2 allowance after its first chunk. */
export const streamAndRevoke = (h: PayPerRequestHarness, payer: FundedAccount): Promise<string> =>
  streamThen(h, payer, UPTO_BODY, () => revokePermit2(h, payer));

/** A config file naming the harness's database, and the environment to run `tollgate admin …` against it as an operator does. */
export function operatorConfig(h: PayPerRequestHarness): { file: string; env: NodeJS.ProcessEnv; done: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-upto-cli-'));
  const file = join(dir, 'tollgate.yaml');
  writeFileSync(file, stringify({ ...h.gatewayConfig, database: { url: h.gw.config.database.url } }));
  return { file, env: { ...h.env, TOLLGATE_CONFIG: file }, done: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The payer's last upto settle was broadcast and its receipt wait (`waitSeconds`, the suite's
 * topup.settleWaitSeconds) is over; with automine off it is still unmined.
 */
export async function sentButUnmined(h: PayPerRequestHarness, payer: FundedAccount, waitSeconds = 2): Promise<PaymentRow> {
  await until(async () => Boolean((await uptoPayments(h, payer)).at(-1)?.tx_hash), 'the upto settle was broadcast', 20_000);
  await new Promise((resolve) => setTimeout(resolve, (waitSeconds + 1) * 1000));
  return (await uptoPayments(h, payer)).at(-1)!;
}
