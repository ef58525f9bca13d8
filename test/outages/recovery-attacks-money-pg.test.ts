import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, test } from 'node:test';
import { until } from '../support/until.ts';
import { waitForHealth } from './support.ts';
import { chargedMetric, streamChat, useSpoolGateway } from './spool-support.ts';

const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240;

/**
 * Attack 23.4 on a real PostgreSQL: it shuts down as a stream finishes (the settle is spooled at
 * its first outage) and comes back; whichever of the retry or the replay applies it, the stream is
 * charged once, the metric counts it once, and the spool is forgotten.
 */
describe('attack (PostgreSQL): a stream spooled early, PostgreSQL back, retry and replays', () => {
  const gw = useSpoolGateway('postgres');

  test('charged once', async () => {
    const { h, spoolDir, rejections } = gw;
    const pg = gw.pg!;
    h.fake.behaviour = { usage: USAGE, delayMs: 1500 };
    const w = await h.wallet(1_000_000);
    const metric = () => chargedMetric(h);
    const before = await metric();
    const streamed = streamChat(h, w.key);
    await until(() => h.fake.received.length === 1, 'at the provider');
    await pg.shutDown();
    await until(() => h.gw.logs().includes('spooled, retrying'), 'spooled at the first outage', 20_000);
    await pg.startAgain();
    // Replays while the settle may still be retrying, then after.
    const replays = [h.gw.services.settler.replay().catch((e) => e), h.gw.services.settler.replay().catch((e) => e)];
    const s = await streamed;
    assert.match(s.text, /\[DONE\]/);
    await Promise.all(replays);
    await waitForHealth(h.gw.url, 'ok');
    const db = h.gw.services.storage.db;
    const charged = () => db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').where('reference', '=', s.id).execute();
    await until(async () => (await h.gw.services.settler.replay(), (await charged()).length >= 1), 'charged', 30_000);
    await h.gw.services.settler.replay();
    await h.gw.services.settler.replay();
    assert.deepEqual(
      (await charged()).map((c) => Number(c.amount_usdc)),
      [-CHARGE],
    );
    assert.equal((await db.selectFrom('request_usage').select('request_id').where('request_id', '=', s.id).execute()).length, 1);
    const daily = await db.selectFrom('usage_daily').selectAll().execute();
    assert.equal(
      daily.reduce((a, d: any) => a + Number(d.request_count), 0),
      1,
    );
    assert.equal((await metric()) - before, CHARGE, 'metric counted once');
    const b = await h.balance(w.account);
    assert.deepEqual([Number(b.balance_usdc), Number(b.locked_usdc)], [1_000_000 - CHARGE, 0]);
    assert.deepEqual(
      readdirSync(spoolDir).filter((f) => f.endsWith('.jsonl')),
      [],
    );
    assert.doesNotMatch(h.gw.logs(), /"statusCode":500|unhandled error/);
    await h.gw.assertLedger();
    assert.deepEqual(rejections, []);
  });
});
