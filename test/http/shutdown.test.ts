import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startChatHarness } from '../support/chat-harness.ts';
import { startFakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { startGatewayProcess } from '../support/gateway-process.ts';
import { MODELS } from '../support/chat-harness.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { openStorage } from '../../src/storage/database.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { call } from '../support/gateway.ts';
import { newAccount, createKeyProof } from '../support/siwe.ts';
import { until } from '../support/until.ts';

describe('graceful shutdown', () => {
  test('in-flight requests that finish within the grace are settled; the rest are cut (a stream is charged for what it delivered), never left locked', async () => {
    const h = await startChatHarness('sqlite');
    let stopped: Promise<void> | undefined;
    try {
      const { key, account } = await h.wallet(1_000_000);
      const client = h.client(key);
      // One request that answers after 1.5 s, and a stream that would take 20 s.
      h.fake.behaviour = { delayMs: 1500 };
      const quick = client.chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
      await until(() => h.fake.received.length === 1);
      h.fake.behaviour = { chunkDelayMs: 1000 };
      const slow = client.chat.completions
        .create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true })
        .then(async (s) => {
          for await (const _ of s) void _;
        })
        .catch((err: Error) => err);
      await until(() => h.fake.received.length === 2);
      const db = h.gw.services.storage.db;
      assert.equal((await db.selectFrom('reservations').selectAll().where('status', '=', 'pending').execute()).length, 2);

      const started = Date.now();
      stopped = h.gw.stop({ graceMs: 4000 });
      // New connections are refused at once.
      await assert.rejects(fetch(`${h.gw.url}/health`));
      const done = await quick;
      assert.equal(done.choices.length, 1);
      await stopped;
      const took = Date.now() - started;
      assert.ok(took < 12_000, `stop took ${took} ms`);
      assert.ok((await slow) instanceof Error, 'the slow stream should have been cut');

      // Read the closed database again: both settled (the cut stream for the words it had
      // delivered, status 'shutdown'), nothing locked.
      const storage = openStorage(h.gw.config.database.url);
      try {
        const rows = await storage.db.selectFrom('reservations').select(['status', 'charged_usdc']).orderBy('id').execute();
        assert.deepEqual(
          rows.map((r) => r.status),
          ['settled', 'settled'],
        );
        const usage = await storage.db.selectFrom('request_usage').select('status').orderBy('id').execute();
        assert.deepEqual(
          usage.map((r) => r.status),
          ['ok', 'shutdown'],
        );
        const wallet = await storage.db.selectFrom('wallets').selectAll().where('address', '=', account.address.toLowerCase()).executeTakeFirstOrThrow();
        assert.equal(Number(wallet.locked_usdc), 0);
        assert.equal(Number(wallet.balance_usdc), 1_000_000 - Number(rows[0]!.charged_usdc) - Number(rows[1]!.charged_usdc));
        assert.deepEqual((await checkLedger(storage.db)).problems, []);
      } finally {
        await storage.close();
      }
    } finally {
      await (stopped ?? h.gw.stop({ graceMs: 0 }));
      await h.fake.close();
    }
  });

  test('SIGTERM: the process finishes the request in flight, then exits 0', async () => {
    const fake = await startFakeOpenAI();
    const databaseUrl = await freshDatabaseUrl('sqlite');
    const gateway = await startGatewayProcess({
      database: { url: databaseUrl },
      providers: { fake: { baseUrl: fake.url } },
      models: MODELS.filter((m) => m.provider === 'fake'),
    });
    const storage = openStorage(databaseUrl);
    try {
      const account = newAccount();
      await adjustBalance(storage.db, { wallet: account.address, amountUsdc: 1_000_000 });
      const created = await call(gateway.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
      assert.equal(created.status, 201, created.text);
      fake.behaviour = { delayMs: 1500 };
      const pending = call(
        gateway.url,
        'POST',
        '/v1/chat/completions',
        { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] },
        { authorization: `Bearer ${created.body.key}` },
      );
      // SIGTERM while the request is at the provider (a fixed 200 ms could come before the gateway had it, on a loaded machine).
      await until(() => fake.received.length === 1, 'the request at the provider');
      const exited = new Promise<number | null>((r) => gateway.child.once('exit', (code) => r(code)));
      gateway.child.kill('SIGTERM');
      const res = await pending;
      assert.equal(res.status, 200, res.text);
      assert.equal(await exited, 0);
      assert.match(gateway.output(), /shutting down/);
      // It closed because the work was done, not because the grace ran out.
      assert.doesNotMatch(gateway.output(), /grace ran out/);
      const rows = await storage.db.selectFrom('reservations').select('status').execute();
      assert.deepEqual(
        rows.map((r) => r.status),
        ['settled'],
      );
      assert.deepEqual((await checkLedger(storage.db)).problems, []);
    } finally {
      await gateway.stop();
      await storage.close();
      await fake.close();
    }
  });
});
