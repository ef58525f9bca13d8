import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { before, describe, test } from 'node:test';
import { call } from '../support/gateway.ts';
import type { ChatHarness } from '../support/chat-harness.ts';
import { until } from '../support/until.ts';
import { chatBody } from './support.ts';
import { chargedMetric, streamChat, useSpoolGateway } from './spool-support.ts';

const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240;

/**
 * Attack: the settle's write commits, then its connection drops before the answer (what a
 * PostgreSQL connection cut after COMMIT looks like to the caller: ECONNRESET). Simulated by wrapping
 * the storage's write unit: `mode` 'once' = the first settle write commits then throws, the next
 * ones run; 'always' = the first commits then throws, every later one throws without running
 * (the database stays unreachable through all retries).
 */
describe('attack: a settle committed, then its connection dropped', () => {
  const gw = useSpoolGateway();
  let h: ChatHarness;
  before(() => void (h = gw.h));

  const metric = () => chargedMetric(h);
  const reset = () => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });

  /** Arms the fault for the next write unit; returns a function that disarms it. */
  function commitThenDrop(mode: 'once' | 'always'): () => void {
    const storage = h.gw.services.storage as { writeUnit: (...a: any[]) => Promise<any> };
    const original = storage.writeUnit;
    let calls = 0;
    storage.writeUnit = async (...args: any[]) => {
      calls++;
      if (calls === 1) {
        await original(...args);
        throw reset();
      }
      if (mode === 'always') throw reset();
      return original(...args);
    };
    return () => void (storage.writeUnit = original);
  }

  async function run(stream: boolean, mode: 'once' | 'always') {
    h.fake.behaviour = { usage: USAGE, delayMs: 300 };
    const w = await h.wallet(1_000_000);
    const before = await metric();
    const seen = h.fake.received.length;
    const auth = { authorization: `Bearer ${w.key}` };
    const answer = stream
      ? streamChat(h, w.key).then((r) => ({ ...r, charged: null as string | null, billing: null as string | null }))
      : call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth).then((r) => ({
          status: r.status,
          id: r.headers.get('x-request-id')!,
          text: r.text,
          charged: r.headers.get('x-tollgate-charged-usdc'),
          billing: r.headers.get('x-tollgate-billing'),
        }));
    await until(() => h.fake.received.length === seen + 1, 'at the provider');
    const disarm = commitThenDrop(mode);
    let a;
    try {
      a = await answer;
    } finally {
      disarm();
    }
    await h.gw.services.settler.replay();
    await h.gw.services.settler.replay();
    const db = h.gw.services.storage.db;
    const charges = await db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').where('reference', '=', a.id).execute();
    const counted = (await metric()) - before;
    assert.equal(a.status, 200, a.text);
    assert.deepEqual(
      charges.map((c) => Number(c.amount_usdc)),
      [-CHARGE],
      'charged once',
    );
    if (!stream) assert.equal(a.charged, String(CHARGE));
    assert.deepEqual(
      readdirSync(gw.spoolDir).filter((f) => f.endsWith('.jsonl')),
      [],
      'spool forgotten',
    );
    await h.gw.assertLedger();
    assert.deepEqual(gw.rejections, []);
    assert.equal(counted, CHARGE, 'the charge is counted in the metric exactly once');
  }

  test('stream, dropped once', () => run(true, 'once'));
  test('plain, dropped once', () => run(false, 'once'));
  test('stream, committed then unreachable through every retry', () => run(true, 'always'));
  test('plain, committed then unreachable through every retry', () => run(false, 'always'));
});
