import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES, tempDir } from '../support/engines.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';

/**
 * Who gains: a key holder whose request is answered while the database does
 * not answer (a restart, a failover, a SQLite lock held elsewhere): the provider's answer was
 * produced (the operator pays for it) and then left unbilled, either because the settle failed or
 * because the sweeper released the reservation before the bill could land. The database outage is
 * injected with the test fail point TOLLGATE_TEST_SETTLE_FAILURE=outage (every settle and replay
 * fails as a refused connection would); PostgreSQL really stopped is in test/outages/settle-spool.test.ts.
 */

const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4 micro-USDC (chat-small, 20% markup)
const chatBody = { model: 'chat-small', messages: [{ role: 'user', content: 'hi' }] };

for (const engine of ENGINES) {
  describe(`an answer the provider produced is billed exactly once (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine, { ledger: { spoolDir: tempDir() } });
      h.fake.behaviour = { usage: USAGE };
    });
    after(() => h?.stop());

    const db = () => h.gw.services.storage.db;
    const hook = (value: 'outage' | null) => (h.gw.services.failPoints.settleFailure = value);
    const usageRows = (id: string) => db().selectFrom('request_usage').selectAll().where('request_id', '=', id).execute();
    const money = async (account: Parameters<ChatHarness['balance']>[0]) => {
      const b = await h.balance(account);
      return { balance: Number(b.balance_usdc), locked: Number(b.locked_usdc) };
    };
    const charges = (id: string) => db().selectFrom('ledger_entries').selectAll().where('kind', '=', 'charge').where('reference', '=', id).execute();

    test('a settle the database did not take is answered (billing deferred), spooled, and charged once however often the spool is replayed', async () => {
      const w = await h.wallet(1_000_000);
      hook('outage');
      let res;
      try {
        res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${w.key}` });
      } finally {
        hook(null);
      }
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers.get('x-tollgate-billing'), 'deferred');
      assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), CHARGE);
      const id = res.headers.get('x-request-id')!;

      await Promise.all([h.gw.services.settler.replay(), h.gw.services.settler.replay()]);
      await h.gw.services.settler.replay();
      await h.gw.services.settler.replay();
      assert.equal((await usageRows(id)).length, 1);
      assert.deepEqual(
        (await charges(id)).map((e) => Number(e.amount_usdc)),
        [-CHARGE],
      );
      assert.deepEqual(await money(w.account), { balance: 1_000_000 - CHARGE, locked: 0 });
      await assertLedgerConsistent(db());
    });

    test('a spooled settle whose reservation the sweeper released first is charged once, from the free balance only, and the shortfall is reported', async () => {
      const w = await h.wallet(1_000_000);
      hook('outage');
      let res;
      try {
        res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${w.key}` });
        assert.equal(res.status, 200, res.text);
        // The lease runs out during the outage: the sweeper releases the reservation, charging nothing.
        assert.equal(await sweepExpiredReservations(db(), Date.now() + h.gw.config.chat.reservationLeaseSeconds * 1000 + 1), 1);
      } finally {
        hook(null);
      }
      const id = res.headers.get('x-request-id')!;
      // Meanwhile another request of the wallet locks all but 100 micro-USDC: the late charge may
      // not take what that request holds.
      const wallet = w.account.address.toLowerCase();
      assert.ok(await reserve(h.gw.services.storage, { wallet, apiKeyId: w.keyId, requestId: `${id}-other`, amountUsdc: 1_000_000 - 100, leaseMs: 600_000 }));

      await h.gw.services.settler.replay();
      await h.gw.services.settler.replay();
      assert.deepEqual(
        (await charges(id)).map((e) => Number(e.amount_usdc)),
        [-100],
      );
      assert.equal((await usageRows(id)).length, 1);
      assert.deepEqual(await money(w.account), { balance: 1_000_000 - 100, locked: 1_000_000 - 100 });
      const check = await checkLedger(db());
      assert.deepEqual(check.problems, []);
      assert.ok(
        check.findings.some((f) => f.includes(id) && f.includes(`charged late 100 of its ${CHARGE}`)),
        check.findings.join('\n'),
      );
    });

    test('a stream whose reservation is released while it runs is still charged for what it delivered', async () => {
      const w = await h.wallet(1_000_000);
      h.fake.behaviour = { usage: USAGE, content: 'one two three four five six seven eight', chunkDelayMs: 300 };
      try {
        const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ ...chatBody, stream: true }),
        });
        const id = res.headers.get('x-request-id')!;
        const reader = res.body!.getReader();
        let text = '';
        // Content is flowing (the first word has arrived)...
        while (!text.includes('one')) text += new TextDecoder().decode((await reader.read()).value);
        // ...when, its lease renewals having failed in an outage, the sweeper releases its reservation.
        await sweepExpiredReservations(db(), Date.now() + h.gw.config.chat.reservationLeaseSeconds * 1000 + 1);
        const swept = await db().selectFrom('reservations').select('status').where('request_id', '=', id).executeTakeFirstOrThrow();
        assert.equal(swept.status, 'voided', 'the stream was still running when its reservation was released');
        for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
        assert.match(text, /\[DONE\]/);
        assert.deepEqual(
          (await charges(id)).map((e) => Number(e.amount_usdc)),
          [-CHARGE],
        );
        assert.equal((await usageRows(id)).length, 1);
        const reservation = await db().selectFrom('reservations').selectAll().where('request_id', '=', id).executeTakeFirstOrThrow();
        assert.equal(reservation.status, 'settled');
        assert.equal(Number(reservation.charged_usdc), CHARGE);
        assert.deepEqual(await money(w.account), { balance: 1_000_000 - CHARGE, locked: 0 });
        await assertLedgerConsistent(db());
      } finally {
        h.fake.behaviour = { usage: USAGE };
      }
    });
  });
}
