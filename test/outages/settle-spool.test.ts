import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { call } from '../support/gateway.ts';
import { startChatHarness, MODELS, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES, freshDatabaseUrl, tempDir } from '../support/engines.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { until } from '../support/until.ts';
import { chatBody, waitForHealth, walletWithKey } from './support.ts';

/**
 * An answer the provider produced is billed exactly once even when the
 * database does not answer at the moment it finishes: the settle is retried, then spooled to
 * local disk, and the spool is applied when the database returns and at start-up.
 */

const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4 micro-USDC (chat-small, 20% markup)

describe('PostgreSQL stopped between the provider answer and the settle', () => {
  let pg: PostgresServer;
  let h: ChatHarness;
  before(async () => {
    pg = await startPostgres();
    h = await startChatHarness('postgres', { ledger: { spoolDir: tempDir() } }, { databaseUrl: await pg.database() });
  });
  after(async () => {
    await h?.stop();
    await pg?.stop();
  });

  test('both a plain and a streamed answer are delivered, and billed once when PostgreSQL is back', async () => {
    h.fake.behaviour = { usage: USAGE, delayMs: 1500 };
    const w = await h.wallet(1_000_000);
    const headers = { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' };
    const plain = call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: headers.authorization });
    const streamed = fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ ...chatBody, stream: true, stream_options: { include_usage: true } }),
    }).then(async (r) => ({
      id: r.headers.get('x-request-id')!,
      text: await r.text(),
    }));
    // Both are reserved and at the provider: stop PostgreSQL while it answers.
    await until(() => h.fake.received.length === 2, 'both requests at the provider');
    await pg.shutDown();

    const answer = await plain;
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.headers.get('x-tollgate-billing'), 'deferred');
    // The usage states the charge to be applied, marked deferred, in the answer and in the stream.
    const deferredCharge = { cost: CHARGE / 1_000_000, charged_usdc: CHARGE, charge_deferred: true };
    const { cost, charged_usdc, charge_deferred } = answer.body.usage;
    assert.deepEqual({ cost, charged_usdc, charge_deferred }, deferredCharge);
    const stream = await streamed;
    assert.match(stream.text, /\[DONE\]/);
    assert.doesNotMatch(stream.text, /"error"/);
    const usageChunk = JSON.parse(
      stream.text
        .split('\n\n')
        .filter((e) => e.includes('"usage"'))
        .at(-1)!
        .slice(6),
    );
    assert.deepEqual(
      { cost: usageChunk.usage.cost, charged_usdc: usageChunk.usage.charged_usdc, charge_deferred: usageChunk.usage.charge_deferred },
      deferredCharge,
    );
    const ids = [answer.headers.get('x-request-id')!, stream.id];

    await pg.startAgain();
    await waitForHealth(h.gw.url, 'ok');
    const db = h.gw.services.storage.db;
    const billed = () =>
      db.selectFrom('ledger_entries').select(['reference', 'amount_usdc']).where('kind', '=', 'charge').where('reference', 'in', ids).execute();
    // The replayer applies the spool every few seconds; a replay here only saves the wait.
    await until(async () => (await h.gw.services.settler.replay(), (await billed()).length === 2), 'the spool applied', 30_000);
    await h.gw.services.settler.replay();
    assert.deepEqual(
      (await billed()).map((e) => Number(e.amount_usdc)),
      [-CHARGE, -CHARGE],
    );
    const usage = await db.selectFrom('request_usage').select('request_id').where('request_id', 'in', ids).execute();
    assert.equal(usage.length, 2);
    const b = await h.balance(w.account);
    assert.deepEqual([Number(b.balance_usdc), Number(b.locked_usdc)], [1_000_000 - 2 * CHARGE, 0]);
    await assertLedgerConsistent(db);
  });
});

for (const engine of ENGINES) {
  describe(`kill -9 after the settle was spooled (${engine})`, () => {
    let fake: FakeOpenAI;
    let storage: Storage;
    let databaseUrl: string;
    const processes: GatewayProcess[] = [];
    before(async () => {
      fake = await startFakeOpenAI({ behaviour: { usage: USAGE } });
      databaseUrl = await freshDatabaseUrl(engine);
    });
    after(async () => {
      await Promise.all(processes.map((p) => p.stop()));
      await storage?.close();
      await fake?.close();
    });

    test('the restarted gateway applies the spool at start-up: billed once, and again on a second restart', async () => {
      const spoolDir = tempDir();
      const config = {
        database: { url: databaseUrl },
        ledger: { spoolDir },
        providers: { fake: { baseUrl: fake.url } },
        models: MODELS.slice(0, 1),
        logging: { level: 'info' },
      };
      // The fail point: every settle fails as if the database did not answer, and the request
      // stops for good right after its settle is on disk.
      const crashing = await startGatewayProcess(config, { TOLLGATE_TEST_SETTLE_FAILURE: 'crash' });
      processes.push(crashing);
      storage = openStorage(databaseUrl, { poolSize: 2 });
      const { key } = await walletWithKey(storage.db, crashing.url);

      const request = call(crashing.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${key}` }).catch((err: Error) => err);
      await until(() => crashing.output().includes('test fail point reached'), 'the settle spooled', 30_000);
      await crashing.kill();
      assert.ok((await request) instanceof Error, 'the request died with the gateway');

      const lines = readdirSync(spoolDir)
        .filter((f) => f.endsWith('.jsonl'))
        .flatMap((f) => readFileSync(join(spoolDir, f), 'utf8').trim().split('\n'));
      assert.equal(lines.length, 1, 'one settle on disk');
      const { requestId } = JSON.parse(lines[0]!);
      const charges = () =>
        storage.db.selectFrom('ledger_entries').select('amount_usdc').where('kind', '=', 'charge').where('reference', '=', requestId).execute();
      assert.deepEqual(await charges(), [], 'nothing charged before the restart');

      const restarted = await startGatewayProcess(config);
      processes.push(restarted);
      // Applied before the gateway listened.
      assert.deepEqual(
        (await charges()).map((e) => Number(e.amount_usdc)),
        [-CHARGE],
      );
      const reservation = await storage.db.selectFrom('reservations').selectAll().where('request_id', '=', requestId).executeTakeFirstOrThrow();
      assert.equal(reservation.status, 'settled');
      await restarted.stop();
      processes.pop();

      const again = await startGatewayProcess(config);
      processes.push(again);
      assert.deepEqual(
        (await charges()).map((e) => Number(e.amount_usdc)),
        [-CHARGE],
        'a second start-up charges nothing more',
      );
      assert.deepEqual(
        readdirSync(spoolDir).filter((f) => f.endsWith('.jsonl')),
        [],
        'the applied spool was removed',
      );
      const rows = await storage.db.selectFrom('request_usage').select('request_id').where('request_id', '=', requestId).execute();
      assert.equal(rows.length, 1);
      await assertLedgerConsistent(storage.db);
    });
  });
}
