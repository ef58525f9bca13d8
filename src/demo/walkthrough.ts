import OpenAI, { AuthenticationError } from 'openai';
import { topupProgress } from '../terminal/progress.ts';
import { checkLedger } from '../ledger/invariants.ts';
import { microToUsd } from '../ledger/usd.ts';
import { GatewayClient } from '../gateway-client/gateway-client.ts';
import { topUp } from '../gateway-client/topup-client.ts';
import type { Printer } from './printer.ts';
import { channelAgent } from './channel-agent.ts';
import { expect } from './demo-step.ts';
import { DEMO_MODEL, type DemoStack } from './stack.ts';

const TOPUP_USD = 5;

/**
 * The scripted client: every step uses the public HTTP API the way a user would (the wallet client,
 * @x402/fetch, siwe, the openai SDK), and checks what it got back.
 */
export async function walkThrough(stack: DemoStack, print: Printer): Promise<{ client: GatewayClient }> {
  const base = stack.gateway.url;
  const client = new GatewayClient(base, stack.wallet);

  print.title('The walk-through');
  let s = print.step('GET /v1/models: what can be called, at what price');
  type Model = { id: string; name: string; promptPricePer1MTokens: number; completionPricePer1M: number };
  const models = (await client.request<{ data: Model[] }>('GET', '/v1/models')).data;
  expect(
    models.some((m) => m.name === DEMO_MODEL),
    `the model list lacks ${DEMO_MODEL}`,
  );
  s.ok(
    models
      .map((m) => `${m.id}: $${m.promptPricePer1MTokens} per 1M prompt tokens, $${m.completionPricePer1M} per 1M completion tokens (with the markup)`)
      .join('\n'),
  );

  s = print.step(`POST /v1/topup: pay $${TOPUP_USD} in USDC with @x402/fetch (EIP-3009, settled on the local chain)`);
  const progress = topupProgress('    ', process.stdout);
  const paid = await topUp(client, TOPUP_USD, { method: 'eip3009', onProgress: progress.on }).finally(() => progress.finish());
  expect(paid.credited_usdc === TOPUP_USD * 1_000_000, `expected ${TOPUP_USD * 1_000_000} micro-USDC credited, got ${paid.credited_usdc}`);
  s.ok(`credited $${microToUsd(paid.credited_usdc)}; balance $${microToUsd(paid.balance_usdc ?? 0)}\ntransaction ${paid.transaction}`);

  s = print.step('POST /v1/auth/keys: sign in with Ethereum (SIWE) and create an API key');
  const key = await client.createKey('demo');
  expect(key.key.startsWith('sk-'), 'the new key does not look like an API key');
  s.ok(`key ${key.id}: ${mask(key.key)} (the secret is shown once, and stored hashed)`);

  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: key.key, maxRetries: 0 });
  s = print.step('POST /v1/chat/completions with the openai SDK');
  const { data: completion, response } = await openai.chat.completions
    .create({ model: DEMO_MODEL, messages: [{ role: 'user', content: 'Say hello to the demo.' }] })
    .withResponse();
  const reply = completion.choices[0]?.message.content ?? '';
  expect(reply.length > 0, 'the completion has no text');
  s.ok(
    `"${reply}"\n${completion.usage?.prompt_tokens} prompt + ${completion.usage?.completion_tokens} completion tokens; charged ${response.headers.get('x-tollgate-charged-usdc')} micro-USDC`,
  );

  s = print.step('the same, streamed (server-sent events)');
  const stream = await openai.chat.completions.create({
    model: DEMO_MODEL,
    messages: [{ role: 'user', content: 'Now stream it.' }],
    stream: true,
    stream_options: { include_usage: true },
  });
  let streamed = '';
  let chunks = 0;
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of stream) {
    chunks++;
    streamed += chunk.choices[0]?.delta.content ?? '';
    usage = chunk.usage ?? usage;
  }
  expect(streamed.length > 0 && usage !== undefined, 'the stream carried no text or no usage chunk');
  s.ok(`${chunks} chunks: "${streamed}"\n${usage?.prompt_tokens} prompt + ${usage?.completion_tokens} completion tokens`);

  s = print.step('GET /v1/usage/:wallet: balance and usage per key');
  const report = await client.usage();
  const row = report.keys.find((k) => k.api_key_id === key.id);
  expect(row?.request_count === 2, `expected 2 requests on key ${key.id}, the report says ${row?.request_count}`);
  expect(report.balance_usdc === paid.credited_usdc - row!.total_charged_usdc, 'the balance is not the top-up minus the charges');
  s.ok(
    `balance $${microToUsd(report.balance_usdc)} (locked $${microToUsd(report.locked_usdc)})\nkey ${key.id}: ${row!.request_count} requests, ${row!.total_prompt_tokens + row!.total_completion_tokens} tokens, charged ${row!.total_charged_usdc} micro-USDC`,
  );

  s = print.step('DELETE /v1/auth/keys/:id: revoke the key, then try it again');
  await client.revokeKey(key.id);
  const refusal = await openai.chat.completions.create({ model: DEMO_MODEL, messages: [{ role: 'user', content: 'Still there?' }] }).then(
    () => null,
    (err: unknown) => err,
  );
  expect(refusal instanceof AuthenticationError, `the revoked key was not refused (${String(refusal)})`);
  // The openai SDK keeps the body's "error" field: here Tollgate's stable code.
  s.ok(`refused as expected: ${(refusal as AuthenticationError).status} ${String((refusal as AuthenticationError).error)}`);

  s = print.step('ledger check: every micro-USDC accounted for, on chain and in the database');
  const ledger = await checkLedger(stack.gateway.services.storage.db);
  expect(ledger.ok, `ledger invariants failed:\n${ledger.problems.join('\n')}`);
  const received = await stack.chain.balanceOf(stack.chain.usdc, stack.payTo.address);
  expect(received === BigInt(paid.credited_usdc), `payTo received ${received} USDC units on chain but ${paid.credited_usdc} were credited`);
  const after = await client.usage();
  const charged = after.keys.reduce((sum, k) => sum + k.total_charged_usdc, 0);
  expect(after.balance_usdc + charged === paid.credited_usdc && after.locked_usdc === 0, 'balance + charges do not add up to the top-up');
  s.ok(
    `invariants hold; payTo received ${microToUsd(Number(received))} USDC on chain = credited $${microToUsd(paid.credited_usdc)} = balance $${microToUsd(after.balance_usdc)} + charged $${microToUsd(charged)}`,
  );

  // The top-up was one transferWithAuthorization: the transaction `exact` sends for every paid request.
  await channelAgent(stack, print, paid.transaction);
  return { client };
}

/** Enough of a key to recognise it, not enough to use it. */
export function mask(key: string): string {
  return `${key.slice(0, 6)}…${key.slice(-4)}`;
}
