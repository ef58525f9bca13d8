import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import { adjustBalance } from '../../src/ledger/movements.ts';
import type { Database } from '../../src/storage/schema.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, newAccount } from '../support/siwe.ts';
import { startTwoChatInstances, type TwoChatInstances } from '../support/two-chat-instances.ts';

/**
 * Polls /health until it reports `status` (a dependency's loss or return is noticed on the next
 * probe round, at most a second or so later). The deadline only bounds a broken run.
 */
export async function waitForHealth(url: string, status: 'ok' | 'degraded', deadlineMs = 30_000) {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const res = await call(url, 'GET', '/health');
    if (res.body?.status === status) return res;
    if (Date.now() > until) assert.fail(`/health never became ${status}; last answer ${res.status} ${res.text}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The outage answer every route must give: 503 SERVICE_UNAVAILABLE with Retry-After. */
export function assertOutageAnswer(res: { status: number; headers: Headers; body: any; text: string }, dependency: string, what: string) {
  assert.equal(res.status, 503, `${what}: ${res.status} ${res.text}`);
  assert.equal(res.body.error, 'SERVICE_UNAVAILABLE', what);
  assert.equal(res.body.dependency, dependency, what);
  assert.ok(Number(res.headers.get('retry-after')) > 0, `${what}: Retry-After`);
}

export const chatBody = { model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] };

/**
 * Sends `send` until it answers `status`, and returns that answer and how long it took; fails if
 * `boundMs` passes first (the recovery bound a test holds the gateway to).
 */
export async function answersWithin<T extends { status: number; text: string }>(send: () => Promise<T>, status: number, boundMs: number) {
  const started = Date.now();
  for (;;) {
    const res = await send();
    if (res.status === status) return { res, tookMs: Date.now() - started };
    if (Date.now() - started > boundMs) assert.fail(`no ${status} within ${boundMs} ms; last answer ${res.status} ${res.text}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A new wallet funded with `usdc` micro-USDC, and an API key for it made through the gateway at `url`. */
export async function walletWithKey(db: Kysely<Database>, url: string, usdc = 1_000_000) {
  const account = newAccount();
  await adjustBalance(db, { wallet: account.address, amountUsdc: usdc, note: 'test funding' });
  const created = await call(url, 'POST', '/v1/auth/keys', await createKeyProof(account));
  assert.equal(created.status, 201, created.text);
  return { account, key: created.body.key as string };
}

/**
 * Two chat instances on one PostgreSQL and one redis-server, their rate limits in Redis: chat at
 * `chatPerMinute` per wallet shared by the two (rateLimits.instances: 2, so each allows half alone
 * while Redis is down), auth failures at `authFailuresPerMinute`, everything else loose; every
 * answer reports 10 + 10 tokens.
 */
export async function startRedisLimitedPair(chatPerMinute: number, authFailuresPerMinute: number): Promise<TwoChatInstances> {
  const instances = await startTwoChatInstances({
    rateLimits: {
      backend: 'redis',
      instances: 2,
      chat: { perMinute: chatPerMinute, perDay: 1000 },
      keys: { perMinute: 1000 },
      public: { perMinute: 1000 },
      authFailures: { perMinute: authFailuresPerMinute },
    },
  });
  instances.a.fake.behaviour = instances.b.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
  return instances;
}
