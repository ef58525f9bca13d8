import assert from 'node:assert/strict';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { until } from '../support/until.ts';
import { streamChat, useSpoolGateway } from './spool-support.ts';

/**
 * Attack: one line the replay can never apply ("names no reservation in this database", e.g. a
 * spool carried to a restored database) sits in the slot; streams then meet short outages, so each
 * is spooled early and billed by its retry. Expected: the billed lines are forgotten (the spool does
 * not grow without bound, and a replay round does not re-run a write per billed line for ever).
 */
describe('attack: one unappliable line pins every early-spooled line of its slot', () => {
  const gw = useSpoolGateway();

  test('billed lines are forgotten', async () => {
    const { h, spoolDir } = gw;
    h.fake.behaviour = { usage: { prompt_tokens: 100, completion_tokens: 50 } };
    const w = await h.wallet(1_000_000);
    const slot = readdirSync(spoolDir)
      .find((f) => f.endsWith('.lock'))!
      .replace(/\.lock$/, '.jsonl');
    const usage = {
      requestId: 'no-such-request',
      apiKeyId: 1,
      wallet: w.account.address,
      model: 'chat-small',
      provider: 'fake',
      promptTokens: 1,
      completionTokens: 1,
      reasoningTokens: 0,
      cachedTokens: 0,
      estimated: false,
      providerCostUsdc: 0,
      status: 'ok',
      latencyMs: 1,
    };
    appendFileSync(
      join(spoolDir, slot),
      `${JSON.stringify({ requestId: 'no-such-request', wallet: w.account.address, chargeUsdc: 1, usage, spooledAt: Date.now() })}\n`,
    );
    const failPoints = h.gw.services.failPoints;
    const N = 5;
    for (let i = 0; i < N; i++) {
      const logsBefore = h.gw.logs().split('spooled, retrying').length;
      failPoints.settleFailure = 'outage';
      const s = streamChat(h, w.key).then((r) => r.text);
      await until(() => h.gw.logs().split('spooled, retrying').length > logsBefore, 'spooled early', 20_000);
      failPoints.settleFailure = null;
      assert.match(await s, /\[DONE\]/);
    }
    const db = h.gw.services.storage.db;
    // Count the write units (write transactions) each replay round runs.
    const storage = h.gw.services.storage as { writeUnit: (...a: any[]) => Promise<any> };
    const original = storage.writeUnit;
    let writes = 0;
    storage.writeUnit = (...a: any[]) => (writes++, original(...a));
    const stamps: number[] = [];
    for (let round = 0; round < 3; round++) {
      writes = 0;
      await h.gw.services.settler.replay();
      stamps.push(writes);
    }
    storage.writeUnit = original;
    const lines = readFileSync(join(spoolDir, slot), 'utf8').trim().split('\n').length;
    const charges = await db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').execute();
    await h.gw.assertLedger();
    assert.deepEqual(gw.rejections, []);
    assert.equal(charges.length, N, 'each stream charged once');
    assert.equal(lines, 1, 'only the unappliable line stays');
    // From the second round on, only the unappliable line is tried: its settle and its late charge.
    assert.ok(stamps[1]! <= 2 && stamps[2]! <= 2, `write transactions per replay round ${JSON.stringify(stamps)}`);
    assert.match(readFileSync(join(spoolDir, slot), 'utf8'), /no-such-request/, 'the unappliable line is kept for the operator');
  });
});
