import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { startPostgres, type PostgresServer } from '../support/postgres.ts';
import { until } from '../support/until.ts';
import { assertOutageAnswer, chatBody, waitForHealth } from './support.ts';

/**
 * PostgreSQL restarted under load: every answer is a 200 (served and billed) or a 503 with
 * Retry-After (nothing billed, retry), never a 500; /health reports the database down and comes
 * back by itself; afterwards the ledger holds and nothing stays locked beyond the sweeper.
 */
describe('PostgreSQL outage: 503s, not 500s, and recovery by itself', () => {
  let pg: PostgresServer;
  let h: ChatHarness;
  before(async () => {
    pg = await startPostgres();
    h = await startChatHarness('postgres', {}, { databaseUrl: await pg.database() });
  });
  after(async () => {
    await h?.stop();
    await pg?.stop();
  });

  test('chats in flight when the server shuts down, and chats while it is down, get 503 with Retry-After', async () => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 }, delayMs: 100 };
    const w = await h.wallet(10_000_000);
    const unused = await h.wallet(10_000_000); // its key is not in the lookup cache yet
    const auth = { authorization: `Bearer ${w.key}` };
    assert.deepEqual((await waitForHealth(h.gw.url, 'ok')).body.checks, { database: 'ok' });

    // 40 chats over about a second, each spending 100 ms at the provider; the shutdown lands in
    // the middle, so some finish before it, some are cut off in flight, and some start after it.
    const burst = Array.from({ length: 40 }, (_, i) =>
      new Promise((r) => setTimeout(r, i * 25)).then(() => call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth)),
    );
    await new Promise((r) => setTimeout(r, 400));
    await pg.shutDown();
    const answers = await Promise.all(burst);
    const statuses = answers.map((a) => a.status);
    assert.deepEqual(
      statuses.filter((s) => s !== 200 && s !== 503),
      [],
      `statuses: ${statuses.join(',')}`,
    );
    assert.ok(statuses.includes(503), 'the shutdown hit the burst');
    for (const a of answers.filter((x) => x.status === 503)) assertOutageAnswer(a, 'database', 'chat during the shutdown');

    assertOutageAnswer(await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth), 'database', 'chat while down');
    assertOutageAnswer(await call(h.gw.url, 'POST', '/v1/chat/completions', { ...chatBody, stream: true }, auth), 'database', 'streamed chat while down');
    assertOutageAnswer(
      await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${unused.key}` }),
      'database',
      'a valid key that cannot be looked up is not told 401',
    );
    assertOutageAnswer(await call(h.gw.url, 'GET', `/v1/usage/${w.account.address}`, undefined, auth), 'database', 'usage while down');
    assert.equal((await call(h.gw.url, 'GET', '/v1/models')).status, 200, 'the catalog needs no database');
    const degraded = await waitForHealth(h.gw.url, 'degraded');
    assert.equal(degraded.status, 503);
    assert.equal(degraded.body.checks.database, 'down');
    assert.doesNotMatch(h.gw.logs(), /unhandled error/);

    await pg.startAgain();
    await waitForHealth(h.gw.url, 'ok');
    const after = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth);
    assert.equal(after.status, 200, after.text);

    // Every 200 was billed exactly once; reservations cut off by the outage are released by the
    // sweeper once their lease ends (run here with the clock past the lease).
    const db = h.gw.services.storage.db;
    const served = [...answers.filter((a) => a.status === 200), after].map((a) => a.headers.get('x-request-id')!);
    // Chats whose provider answer arrived during the shutdown were answered with their bill
    // spooled (x-tollgate-billing: deferred); the spool is applied now that the database is back.
    const billedIds = async () =>
      (await db.selectFrom('request_usage').select('request_id').where('wallet', '=', w.account.address.toLowerCase()).execute()).map((u) => u.request_id);
    await until(async () => (await h.gw.services.settler.replay(), (await billedIds()).length >= served.length), 'the spool applied', 30_000);
    const billed = await billedIds();
    assert.equal(new Set(billed).size, billed.length, 'no request billed twice');
    for (const id of served) assert.ok(billed.includes(id), `answered request ${id} was billed`);
    await sweepExpiredReservations(db, Date.now() + h.gw.config.chat.reservationLeaseSeconds * 1000 + 1);
    const pending = await db.selectFrom('reservations').select('request_id').where('status', '=', 'pending').execute();
    assert.deepEqual(pending, []);
    assert.equal((await h.balance(w.account)).locked_usdc, 0);
    await h.gw.assertLedger();
  });
});
