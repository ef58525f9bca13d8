import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { MODELS } from '../support/chat-harness.ts';
import { freshDatabaseUrl, tempDir } from '../support/engines.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { until } from '../support/until.ts';
import { chatBody, walletWithKey } from './support.ts';

const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240;

/**
 * Attack: a graceful stop (SIGTERM) while a delivered stream's settle is still retrying, with a
 * second instance on the same database and spool folder that keeps running. Expected: the stop
 * ends cleanly (no unhandled rejection, no 500), the line is not applied twice, and the charge is
 * applied exactly once (by the stopping instance, the running one, or the next start).
 */
describe('attack: SIGTERM while a stream settle is retrying, a second instance sharing the spool', () => {
  let fake: FakeOpenAI;
  let storage: Storage;
  const processes: GatewayProcess[] = [];
  before(async () => {
    fake = await startFakeOpenAI({ behaviour: { usage: USAGE } });
  });
  after(async () => {
    await Promise.all(processes.map((p) => p.stop().catch(() => undefined)));
    await storage?.close();
    await fake?.close();
  });

  test('billed once', async () => {
    const databaseUrl = await freshDatabaseUrl('sqlite');
    const spoolDir = tempDir();
    const config = { database: { url: databaseUrl }, ledger: { spoolDir }, providers: { fake: { baseUrl: fake.url } }, models: MODELS.slice(0, 1) };
    const other = await startGatewayProcess(config);
    processes.push(other);
    const stopping = await startGatewayProcess(config, { TOLLGATE_TEST_SETTLE_FAILURE: 'outage' });
    storage = openStorage(databaseUrl);
    const { key } = await walletWithKey(storage.db, other.url);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const streamed = fetch(`${stopping.url}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ ...chatBody, stream: true }) }).then(
      async (r) => ({
        id: r.headers.get('x-request-id')!,
        text: await r.text().catch((e) => `<<${e}>>`),
      }),
    );
    await until(() => stopping.output().includes('spooled, retrying'), 'spooled, retrying', 30_000);
    await stopping.stop();
    await streamed;
    const out = stopping.output();
    assert.doesNotMatch(out, /unhandled|"statusCode":500/);
    assert.ok(
      readdirSync(spoolDir).some((f) => f.endsWith('.jsonl')),
      'the stopped instance left its spooled line on disk',
    );

    const charges = () => storage.db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').execute();
    // The running instance: does it ever apply the stopped one's line? (10 s: two replay rounds)
    await new Promise((r) => setTimeout(r, 10_000));
    assert.ok((await charges()).length <= 1, 'never charged twice, whoever applies the line');
    const restarted = await startGatewayProcess(config);
    processes.push(restarted);
    await until(async () => (await charges()).length > 0, 'charged after a new start', 20_000);
    assert.deepEqual(
      (await charges()).map((e) => Number(e.amount_usdc)),
      [-CHARGE],
    );
    await assertLedgerConsistent(storage.db);
  });
});
