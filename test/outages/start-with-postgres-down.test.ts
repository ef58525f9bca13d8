import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { MODELS } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { answersWithin, assertOutageAnswer, chatBody, waitForHealth, walletWithKey } from './support.ts';

const RECOVERY_BOUND_MS = 10_000;

/**
 * PostgreSQL is the one dependency a start needs (migrations, the key secret, the spool replay
 * that must run before the sweeper). Decision (docs/DECISIONS.md): a start with it down exits 2 with
 * one line naming it, for the supervisor to start again; once started, the instance rides out any
 * PostgreSQL outage by itself. Both halves, as an operator's supervisor sees them.
 */
describe('PostgreSQL down at start, then down and back after start', () => {
  let pg: PostgresServer;
  let fake: FakeOpenAI;
  let storage: Storage;
  let gw: GatewayProcess | undefined;
  before(async () => {
    [pg, fake] = await Promise.all([startPostgres(), startFakeOpenAI({ behaviour: { usage: { prompt_tokens: 10, completion_tokens: 10 } } })]);
  });
  after(async () => {
    await gw?.stop();
    await storage?.close();
    await Promise.all([pg?.stop(), fake?.close()]);
  });

  test('a start with it down exits 2 naming PostgreSQL; the next start serves; an outage after start answers 503 "database" and chats are served within 10 s of its return', async () => {
    const databaseUrl = await pg.database();
    const config = { database: { url: databaseUrl }, providers: { fake: { baseUrl: fake.url } }, models: MODELS.slice(0, 1) };
    const env = { TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex') };

    await pg.shutDown();
    await assert.rejects(
      startGatewayProcess(config, env),
      /exited \(2\) before it was ready:\s*tollgate: cannot reach PostgreSQL at postgres:\/\/postgres@127\.0\.0\.1:\d+\/\w+ \(ECONNREFUSED\)/,
    );

    await pg.startAgain();
    gw = await startGatewayProcess(config, env);
    storage = openStorage(databaseUrl, { poolSize: 2 });
    const auth = { authorization: `Bearer ${(await walletWithKey(storage.db, gw.url)).key}` };
    const chat = () => call(gw!.url, 'POST', '/v1/chat/completions', chatBody, auth);
    assert.equal((await chat()).status, 200);

    await pg.shutDown();
    assertOutageAnswer(await chat(), 'database', 'chat while PostgreSQL is down');
    assert.deepEqual((await waitForHealth(gw.url, 'degraded')).body.checks, { database: 'down' });
    await pg.startAgain();
    await answersWithin(chat, 200, RECOVERY_BOUND_MS);
    await waitForHealth(gw.url, 'ok', RECOVERY_BOUND_MS);

    assert.doesNotMatch(gw.output(), /unhandled/i, 'no unhandled rejection and no unhandled error');
    await assertLedgerConsistent(storage.db);
  });
});
