import assert from 'node:assert/strict';
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
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4 micro-USDC (chat-small, 20% markup)

/**
 * A settle whose database write is still in its retry loop when the process dies must not be
 * lost (the sweeper would void its reservation). A delivered answer's (a stream's) is on disk
 * from its first outage. A non-streaming answer is handed out only after its settle, so a kill
 * during the retries delivered nothing and rightly charges nothing.
 */
describe('kill -9 while a settle is still retrying the database', () => {
  let fake: FakeOpenAI;
  let storage: Storage;
  const processes: GatewayProcess[] = [];
  before(async () => {
    fake = await startFakeOpenAI({ behaviour: { usage: USAGE } });
  });
  after(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await storage?.close();
    await fake?.close();
  });

  test('the restarted gateway bills the delivered stream once', async () => {
    const databaseUrl = await freshDatabaseUrl('sqlite');
    const config = { database: { url: databaseUrl }, ledger: { spoolDir: tempDir() }, providers: { fake: { baseUrl: fake.url } }, models: MODELS.slice(0, 1) };
    // Every settle fails as if the database did not answer; the process is killed during the
    // retries (about 4 s of them), before they could end in the spool as they used to.
    const dying = await startGatewayProcess(config, { TOLLGATE_TEST_SETTLE_FAILURE: 'outage' });
    processes.push(dying);
    storage = openStorage(databaseUrl);
    const { key } = await walletWithKey(storage.db, dying.url);

    // A stream: its content is out before its settle, so the settle must survive the process.
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const delivered = fetch(`${dying.url}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ ...chatBody, stream: true }) }).then((r) =>
      r.body!.getReader().read(),
    );
    await until(() => dying.output().includes('spooled, retrying'), 'the first settle attempt failed', 30_000);
    await dying.kill();
    processes.pop();
    assert.match(new TextDecoder().decode((await delivered).value), /chat\.completion\.chunk/, 'content reached the client');
    assert.doesNotMatch(dying.output(), /the settle is spooled and will be applied/, 'killed inside the retry loop');

    const charges = () => storage.db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').execute();
    assert.deepEqual(await charges(), [], 'nothing charged before the restart');
    const restarted = await startGatewayProcess(config);
    processes.push(restarted);
    // Applied at start-up, before the gateway listened (and before its sweeper could void it).
    assert.deepEqual(
      (await charges()).map((e) => Number(e.amount_usdc)),
      [-CHARGE],
    );
    const reservations = await storage.db.selectFrom('reservations').select('status').execute();
    assert.deepEqual(reservations, [{ status: 'settled' }]);
    await assertLedgerConsistent(storage.db);
  });
});
