import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { planChat } from '../../src/metered/plan/plan.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';
import { newAccount, siweProof, signInProof } from '../support/siwe.ts';

/**
 * Attacks on per-key spend limits and dashboard sessions: a key's limit is a promise to the
 * wallet owner ("this key never spends more than X per period"), and these are the ways a key's
 * spend could go past it.
 */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 };

for (const engine of ENGINES) {
  describe(`attack: a capped key's spend past its limit (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine);
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const chat = (key: string, body: Record<string, unknown> = BODY) =>
      call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${key}` });

    test('a provider reporting more usage than the reservation allows never takes a capped key past its limit', async () => {
      const bodies = [BODY, { ...BODY, stream: true, stream_options: { include_usage: true } }];
      const plans = bodies.map((b) => planChat(structuredClone(b), h.gw.services.catalog, h.gw.services.config));
      // The provider (or a bound that missed an input) bills ten times what the request could use.
      h.fake.behaviour = { usage: { prompt_tokens: plans[0]!.promptUpperBound * 10, completion_tokens: BODY.max_tokens * 10 } };
      try {
        const w = await h.wallet(1_000_000_000);
        // Room for exactly these two requests at their reservations.
        const limit = plans[0]!.reservationUsdc + plans[1]!.reservationUsdc;
        const patched = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${w.keyId}`, { ...(await siweProof(w.account)), spend_limit_usdc: limit });
        assert.equal(patched.status, 200, patched.text);
        for (const body of bodies) {
          const res = await chat(w.key, body);
          assert.equal(res.status, 200, res.text);
        }
        const listed = await call(h.gw.url, 'GET', `/v1/auth/keys?${new URLSearchParams(await siweProof(w.account))}`);
        const key = listed.body.data.find((k: { id: number }) => k.id === w.keyId);
        assert.ok(key.spend_usdc <= limit, `the key spent ${key.spend_usdc} with a limit of ${limit}`);
        assert.equal(key.spend_usdc, limit, 'each request is charged at most what it reserved');
        assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000_000 - limit);
        const third = await chat(w.key);
        assert.equal(third.status, 402);
        assert.equal(third.body.error, 'KEY_LIMIT_EXCEEDED');
      } finally {
        h.fake.behaviour = {};
      }
    });
  });

  describe(`attack (held): dashboard sessions against other wallets and other routes (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine);
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    test("a session never changes another wallet's key, never spends, and rides on no cookie", async () => {
      const victim = await h.wallet(1_000_000);
      const attacker = newAccount();
      const opened = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(attacker), { origin: 'https://evil.example' });
      assert.equal(opened.status, 201, opened.text);
      // Nothing ambient: no cookie to ride on, and CORS never allows credentials.
      assert.equal(opened.headers.get('set-cookie'), null);
      assert.equal(opened.headers.get('access-control-allow-credentials'), null);
      const auth = { authorization: `Bearer ${opened.body.token}` };
      const patched = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${victim.keyId}`, { spend_limit_usdc: 1 }, auth);
      assert.equal(patched.status, 404, patched.text);
      const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${victim.keyId}`, undefined, auth);
      assert.equal(revoked.status, 404, revoked.text);
      const own = await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, {
        authorization: `Bearer ${(await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(victim.account))).body.token}`,
      });
      const key = own.body.data.find((k: { id: number }) => k.id === victim.keyId);
      assert.deepEqual([key.revoked_at, key.spend_limit_usdc], [null, null], "the victim's key is unchanged");
      // The victim's own session, wherever a client might put it, never runs chat.
      const victimSession = (await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(victim.account))).body.token as string;
      const before = h.fake.received.length;
      for (const [path, headers] of [
        ['/v1/chat/completions', { authorization: `Bearer ${victimSession}` }],
        ['/v1/chat/completions', { 'x-api-key': victimSession }],
        [`/v1/chat/completions?api_key=${victimSession}`, {}],
      ] as const) {
        const res = await call(h.gw.url, 'POST', path, BODY, headers);
        assert.equal(res.status, 401, `${path} ${JSON.stringify(Object.keys(headers))}: ${res.text}`);
        assert.ok(!res.text.includes(victimSession), 'the token is never echoed back');
      }
      assert.equal(h.fake.received.length, before, 'no provider call');
      assert.equal((await h.balance(victim.account)).balance_usdc, 1_000_000);
    });
  });

  describe(`attack: a late charge after the sweeper, against the key's limit (${engine})`, () => {
    let storage: Storage;
    before(async () => {
      storage = openStorage(await freshDatabaseUrl(engine));
      const { migrateToLatest } = await import('../../src/storage/migrate.ts');
      await migrateToLatest(storage);
    });
    afterEach(() => assertLedgerConsistent(storage.db));
    after(() => storage.close());

    test("a spooled settle charged late, after the sweeper gave its room to another request, stays within the key's limit", async () => {
      const wallet = await fundedWallet(storage.db, 100_000);
      const row = await storage.db
        .insertInto('api_keys')
        .values({
          wallet,
          key_hash: `h-${Math.random()}`,
          prefix: 'sk-test',
          last4: 'abcd',
          label: '',
          created_at: 0,
          revoked_at: null,
          last_used_at: null,
          spend_limit_usdc: 1_000,
          spend_limit_period: 'total',
          allowed_models: null,
          expires_at: null,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const key = Number(row.id);
      const t0 = Date.now();
      const req = (id: string, leaseMs: number) => ({ wallet, apiKeyId: key, requestId: `${wallet}-${id}`, amountUsdc: 1_000, leaseMs, keyHasLimit: true });
      // a streams its answer while the database is away: its lease runs out and the sweeper frees its room...
      assert.equal((await tryReserve(storage, req('a', 10), t0)).ok, true);
      assert.ok((await sweepExpiredReservations(storage.db, t0 + 1_000)) >= 1);
      // ...which b takes, in full.
      assert.equal((await tryReserve(storage, req('b', 60_000), t0 + 2_000)).ok, true);
      // a's spooled settle comes back: its content is out, but the key has no room left for it.
      const late = await applySettle(storage, { requestId: `${wallet}-a`, wallet, chargeUsdc: 1_000, usage: usageRecord(`${wallet}-a`, wallet) }, t0 + 3_000);
      assert.equal(late.kind, 'late');
      assert.ok(late.kind === 'late' && late.outcome.chargedUsdc === 0 && late.outcome.shortfallUsdc === 1_000, JSON.stringify(late));
      await finishReservation(storage, `${wallet}-b`, 1_000, usageRecord(`${wallet}-b`, wallet), t0 + 4_000);
      const total = await storage.db.selectFrom('key_spend').selectAll().where('api_key_id', '=', key).where('period', '=', 'total').executeTakeFirstOrThrow();
      assert.deepEqual([Number(total.spent_usdc), Number(total.locked_usdc)], [1_000, 0], 'the key spent exactly its limit, not more');
      const shortfall = await storage.db.selectFrom('settle_shortfalls').selectAll().where('request_id', '=', `${wallet}-a`).executeTakeFirst();
      assert.ok(shortfall, 'the uncharged answer is recorded for the operator');
    });
  });
}
