import assert from 'node:assert/strict';
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { call } from '../support/gateway.ts';
import { until } from '../support/until.ts';
import { chatBody } from './support.ts';
import { chargedMetric, streamChat, useSpoolGateway } from './spool-support.ts';

const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240;

/**
 * Attack 23.4: a delivered (streamed) answer's settle is spooled at its first outage, then its retry
 * succeeds; replays run while it retries and after. Expected: charged once in the ledger, one usage
 * row, usage_daily and usage_totals counted once, key spend once, the metric counted once, the spool
 * forgotten, and the ledger consistent.
 */
describe('attack: spooled early, retry succeeds, then the replay', () => {
  const gw = useSpoolGateway();

  test('charged and counted once', async () => {
    const { h, spoolDir, rejections } = gw;
    h.fake.behaviour = { usage: USAGE };
    const w = await h.wallet(1_000_000);
    const failPoints = h.gw.services.failPoints;
    const metricBefore = await chargedMetric(h);
    failPoints.settleFailure = 'outage';
    const streamed = streamChat(h, w.key);
    await until(() => h.gw.logs().includes('spooled, retrying'), 'the first settle attempt failed and was spooled', 20_000);
    // The database answers again; a replay runs before the next retry (250 ms later), another after it.
    failPoints.settleFailure = null;
    await Promise.all([h.gw.services.settler.replay(), h.gw.services.settler.replay()]);
    const s = await streamed;
    assert.match(s.text, /\[DONE\]/);
    await h.gw.services.settler.replay();
    await h.gw.services.settler.replay();

    const db = h.gw.services.storage.db;
    const charges = await db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').where('reference', '=', s.id).execute();
    assert.deepEqual(
      charges.map((c) => Number(c.amount_usdc)),
      [-CHARGE],
      'one charge',
    );
    const usage = await db.selectFrom('request_usage').selectAll().where('request_id', '=', s.id).execute();
    assert.equal(usage.length, 1);
    const daily = await db
      .selectFrom('usage_daily')
      .selectAll()
      .where('wallet', '=', w.account.address.toLowerCase() as never)
      .execute();
    const dailyAny = daily.length ? daily : await db.selectFrom('usage_daily').selectAll().execute();
    assert.equal(
      dailyAny.reduce((a, d: any) => a + Number(d.request_count), 0),
      1,
      'usage_daily counted once',
    );
    assert.equal(
      dailyAny.reduce((a, d: any) => a + Number(d.charged_usdc), 0),
      CHARGE,
    );
    const spend = await db.selectFrom('key_spend').selectAll().execute();
    assert.ok(
      spend.every((k: any) => Number(k.spent_usdc) <= CHARGE && Number(k.locked_usdc) === 0),
      'key spend once, nothing locked',
    );
    assert.equal((await chargedMetric(h)) - metricBefore, CHARGE, 'metric counted once');
    const b = await h.balance(w.account);
    assert.deepEqual([Number(b.balance_usdc), Number(b.locked_usdc)], [1_000_000 - CHARGE, 0]);
    assert.deepEqual(
      readdirSync(spoolDir).filter((f) => f.endsWith('.jsonl')),
      [],
      'the spool line was forgotten',
    );
    await h.gw.assertLedger();
    assert.deepEqual(rejections, []);
  });
});

/**
 * Attack: the spool cannot be written (disk full, read-only, a directory where the file should be)
 * while the database is down. Expected: never a 500, no unhandled rejection, and no free answer
 * the gateway does not at least report.
 */
describe('attack: the spool append fails while the database is down', () => {
  const gw = useSpoolGateway();
  const breakSpool = () => {
    const lock = readdirSync(gw.spoolDir).find((f) => f.endsWith('.lock'))!;
    mkdirSync(join(gw.spoolDir, lock.replace(/\.lock$/, '.jsonl')), { recursive: true });
  };

  test('a non-streaming answer: the client is told 503 (never 500), nothing is charged and its reservation is released', async () => {
    const { h, rejections } = gw;
    h.fake.behaviour = { usage: USAGE };
    const w = await h.wallet(1_000_000);
    let res: Awaited<ReturnType<typeof call>>;
    // Our slot's file cannot be opened for appending (EISDIR): the same path as ENOSPC or EROFS.
    breakSpool();
    const failPoints = h.gw.services.failPoints;
    failPoints.settleFailure = 'outage';
    try {
      res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${w.key}` });
    } finally {
      failPoints.settleFailure = null;
    }
    assert.notEqual(res.status, 500, `${res.status} ${res.text}`);
    assert.equal(res.status, 503, `${res.status} ${res.text}`);
    assert.equal(res.headers.get('retry-after'), '5');
    assert.equal(res.body?.dependency, 'database', res.text);
    assert.doesNotMatch(res.text, /chatcmpl|"choices"/, 'the answer is withheld');
    const id = res.headers.get('x-request-id')!;
    const db = h.gw.services.storage.db;
    const charges = await db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').where('reference', '=', id).execute();
    assert.deepEqual(charges, [], 'nothing charged');
    const reservation = await db.selectFrom('reservations').select(['status', 'charged_usdc']).where('request_id', '=', id).executeTakeFirstOrThrow();
    assert.deepEqual([reservation.status, Number(reservation.charged_usdc)], ['voided', 0], 'the reservation is released, not left locked');
    const b = await h.balance(w.account);
    assert.deepEqual([Number(b.balance_usdc), Number(b.locked_usdc)], [1_000_000, 0]);
    assert.equal((await h.gw.services.metrics.unbilledAnswers.get()).values.length, 0, 'a withheld answer is not an unbilled one');
    await h.gw.assertLedger();
    assert.deepEqual(rejections, []);
  });

  test('a streamed answer: the stream ends without a success marker, no unhandled rejection, and the loss is logged', async () => {
    const { h, rejections } = gw;
    const w = await h.wallet(1_000_000);
    breakSpool();
    const failPoints = h.gw.services.failPoints;
    failPoints.settleFailure = 'outage';
    let s: { id: string; status: number; text: string };
    try {
      s = await streamChat(h, w.key);
    } finally {
      failPoints.settleFailure = null;
    }
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(rejections, []);
    assert.equal(s.status, 200);
    // The headers left before the provider was called, so the failure is the spec's error event
    // (4.7 rule 4), not a silent end: the last payload before [DONE] is an error, and no chunk
    // claims a usage or a charge. A client that checks each payload for `error` sees the failure.
    const payloads = s.text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6));
    const lastJson = JSON.parse(payloads.filter((p) => p !== '[DONE]').at(-1)!) as { error?: { type?: string; message?: string } };
    assert.equal(lastJson.error?.type, 'upstream_error', 'a stream that could not be billed ends with the error event, not as a success');
    assert.match(lastJson.error?.message ?? '', /the gateway failed while streaming/);
    assert.ok(!payloads.some((p) => p !== '[DONE]' && (JSON.parse(p) as { usage?: unknown }).usage), 'no chunk claims a usage');
    // Delivered and unbilled: the sweeper would void the reservation silently, so the loss is
    // reported first, at error level, with the request id and the charge, and counted.
    const lost = h.gw
      .logs()
      .split('\n')
      .filter((l) => l.includes(s.id))
      .map((l) => JSON.parse(l))
      .filter((j) => j.msg?.startsWith('delivered answer could not be billed'));
    assert.equal(lost.length, 1, 'one error line names the unbilled answer');
    assert.equal(lost[0].level, 50, 'error level');
    assert.equal(lost[0].chargeUsdc, CHARGE);
    const counted = (m: Awaited<ReturnType<typeof h.gw.services.metrics.unbilledUsdc.get>>) => m.values.reduce((a, v) => a + v.value, 0);
    assert.equal(counted(await h.gw.services.metrics.unbilledAnswers.get()), 1);
    assert.equal(counted(await h.gw.services.metrics.unbilledUsdc.get()), CHARGE);
    const scraped = await h.gw.services.metrics.registry.metrics();
    assert.match(scraped, /tollgate_settle_spool_writable 0/, 'the scrape shows the spool cannot be written');
  });
});
