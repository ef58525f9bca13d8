import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, test } from 'node:test';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { ENGINES } from '../support/engines.ts';
import { until } from '../support/until.ts';
import { chargedMetric, streamChat, useSpoolGateway } from './spool-support.ts';

const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240;

/**
 * Attack: a stream's settle is spooled at its first outage; while it retries, the sweeper releases
 * its reservation (lease run out); then the database answers: the retry late-charges it, and the
 * replays find the line. Expected: one charge, one usage row, key spend and usage_daily once, the
 * metric once, nothing left locked, ledger consistent.
 */
for (const engine of ENGINES) {
  describe(`attack (${engine}): reservation swept while its early-spooled settle retries`, () => {
    const gw = useSpoolGateway(engine);

    test('charged once', async () => {
      const { h, spoolDir, rejections } = gw;
      h.fake.behaviour = { usage: USAGE };
      const w = await h.wallet(1_000_000);
      const metric = () => chargedMetric(h);
      const before = await metric();
      const failPoints = h.gw.services.failPoints;
      failPoints.settleFailure = 'outage';
      const streamed = streamChat(h, w.key);
      await until(() => h.gw.logs().includes('spooled, retrying'), 'spooled early', 20_000);
      const swept = await sweepExpiredReservations(h.gw.services.storage.db, Date.now() + 3_600_000);
      assert.equal(swept, 1, 'the sweeper released the reservation');
      failPoints.settleFailure = null;
      const s = await streamed;
      assert.match(s.text, /\[DONE\]/);
      await h.gw.services.settler.replay();
      await h.gw.services.settler.replay();
      const db = h.gw.services.storage.db;
      const charges = await db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').where('reference', '=', s.id).execute();
      const usage = await db.selectFrom('request_usage').select('charged_usdc').where('request_id', '=', s.id).execute();
      const daily = await db.selectFrom('usage_daily').selectAll().execute();
      const spend = await db.selectFrom('key_spend').selectAll().execute();
      const reservation = await db.selectFrom('reservations').select(['status', 'charged_usdc']).where('request_id', '=', s.id).executeTakeFirst();
      const b = await h.balance(w.account);
      assert.deepEqual([reservation?.status, Number(reservation?.charged_usdc)], ['settled', CHARGE], 'the swept reservation records the late charge');
      assert.deepEqual(
        charges.map((c) => Number(c.amount_usdc)),
        [-CHARGE],
      );
      assert.equal(usage.length, 1);
      assert.equal(
        daily.reduce((a, d: any) => a + Number(d.request_count), 0),
        1,
      );
      assert.ok(
        spend.every((k: any) => Number(k.spent_usdc) === CHARGE && Number(k.locked_usdc) === 0),
        'key spend once',
      );
      assert.deepEqual([Number(b.balance_usdc), Number(b.locked_usdc)], [1_000_000 - CHARGE, 0]);
      assert.equal((await metric()) - before, CHARGE);
      assert.deepEqual(
        readdirSync(spoolDir).filter((f) => f.endsWith('.jsonl')),
        [],
      );
      await h.gw.assertLedger();
      assert.deepEqual(rejections, []);
    });
  });
}
