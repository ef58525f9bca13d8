import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import type { Metrics } from '../../src/metrics/metrics.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { until } from '../support/until.ts';

/**
 * Attacker: a key holder whose request is slow at the provider (a long prompt, a busy model):
 * were a non-streaming request's lease not renewed, the sweeper would void the reservation while
 * the provider worked, and the answer would be delivered free while the charged-USDC metric still
 * counted the charge.
 */

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4 micro-USDC (chat-small, 20% markup)
const LEASE_SECONDS = 10; // the shortest lease the configuration accepts

/** The charged-USDC counter, summed over models: what /metrics reports. */
async function chargedMetric(metrics: Metrics): Promise<number> {
  return (await metrics.chargedUsdc.get()).values.reduce((sum, v) => sum + v.value, 0);
}

const post = (h: ChatHarness, key: string) =>
  fetch(`${h.gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }),
  });

for (const engine of ENGINES) {
  describe(`reservation leases (${engine})`, () => {
    test('a provider slower than the lease: the lease is renewed, the answer charged, the reservation settled', async () => {
      const h = await startChatHarness(engine, { chat: { reservationLeaseSeconds: LEASE_SECONDS } });
      // Another instance's sweeper, running far more often than the built-in one.
      const db = h.gw.services.storage.db;
      const sweeper = setInterval(() => void sweepExpiredReservations(db).catch(() => undefined), 200);
      try {
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { delayMs: (LEASE_SECONDS + 3) * 1000, usage: USAGE };
        const res = await post(h, w.key);
        assert.equal(res.status, 200, await res.clone().text());
        assert.equal(res.headers.get('x-tollgate-charged-usdc'), String(CHARGE));
        // The break this guards against: voided by the sweeper after 10 s, the answer delivered, nothing charged.
        const reservation = await db.selectFrom('reservations').selectAll().where('api_key_id', '=', w.keyId).executeTakeFirstOrThrow();
        assert.equal(reservation.status, 'settled');
        assert.equal(Number(reservation.charged_usdc), CHARGE);
        assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
        const ledger = await checkLedger(db);
        assert.deepEqual(ledger.problems, []);
        assert.equal(await chargedMetric(h.gw.services.metrics), ledger.chargesUsdc);
      } finally {
        clearInterval(sweeper);
        await h.stop();
      }
    });

    test('a reservation released under a running request: the answer is withheld and the metric counts nothing', async () => {
      const h = await startChatHarness(engine);
      try {
        const db = h.gw.services.storage.db;
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { delayMs: 1500, usage: USAGE };
        const pending = post(h, w.key);
        await until(() => h.fake.received.length === 1);
        // A sweeper whose clock runs an hour ahead (or a lost lease) voids the live reservation.
        assert.equal(await sweepExpiredReservations(db, Date.now() + 3_600_000), 1);
        const res = await pending;
        // The break this guards against: 200 with the answer, nothing charged, and the metric counted 240.
        assert.equal(res.status, 503);
        assert.equal((await res.json()).error, 'SERVICE_UNAVAILABLE');
        assert.equal((await h.balance(w.account)).balance_usdc, FUNDS);
        const ledger = await checkLedger(db);
        assert.deepEqual(ledger.problems, []);
        assert.equal(ledger.chargesUsdc, 0);
        assert.equal(await chargedMetric(h.gw.services.metrics), 0);
        await assertLedgerConsistent(db);
      } finally {
        await h.stop();
      }
    });
  });
}

test('a lease shorter than a renewal can take is refused at load', () => {
  assert.throws(
    () => parseConfig({ chat: { reservationLeaseSeconds: 5 } }),
    (err: Error) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /chat\.reservationLeaseSeconds: must be at least 10/);
      return true;
    },
  );
  assert.equal(parseConfig({ chat: { reservationLeaseSeconds: LEASE_SECONDS } }).chat.reservationLeaseSeconds, LEASE_SECONDS);
});
