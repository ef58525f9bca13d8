import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { after, before, describe, test } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { MODELS } from '../support/chat-harness.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { newAccount, createKeyProof } from '../support/siwe.ts';

/**
 * Durability of billing when the process dies: `tollgate serve` is SIGKILLed in the middle of a
 * load of chats (JSON and streams), with reservations and settles in flight. On SQLite they are
 * group-committed, so this is where a batch answered before its COMMIT would show.
 */
const WORKERS = 24;
const KILL_AFTER_PROVIDER_CALLS = 120;

/**
 * PostgreSQL finishes a statement it already received even when the client process is dead (a
 * one-statement reserve then commits), and rolls back open transactions only once it notices. Wait
 * for that, so the test reads what the database will keep.
 */
async function untilDeadSessionsEnd(storage: Storage): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
      where datname = current_database() and pid <> pg_backend_pid() and state is distinct from 'idle'`.execute(storage.db);
    if (rows[0]!.n === 0) return;
    if (Date.now() > deadline) throw new Error(`${rows[0]!.n} sessions of the killed gateway still busy after 10 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

for (const engine of ENGINES) {
  describe(`a gateway killed under load (${engine})`, () => {
    let fake: FakeOpenAI;
    let databaseUrl: string;
    let storage: Storage;
    const processes: GatewayProcess[] = [];
    const config = () => ({
      database: { url: databaseUrl },
      providers: { fake: { baseUrl: fake.url } },
      models: MODELS.filter((m) => m.provider === 'fake'),
      rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 }, keys: { perMinute: 1000 }, public: { perMinute: 100_000 } },
    });
    const env = { TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex') };

    before(async () => {
      // Answers take 0-20 ms, so at the kill some requests wait for the provider, some are settling.
      fake = await startFakeOpenAI({ behaviourFor: () => ({ delayMs: Math.floor(Math.random() * 20), usage: { prompt_tokens: 10, completion_tokens: 20 } }) });
      databaseUrl = await freshDatabaseUrl(engine);
      processes.push(await startGatewayProcess(config(), env));
      storage = openStorage(databaseUrl, { poolSize: 2 });
    });
    after(async () => {
      await Promise.all(processes.map((p) => p.stop()));
      await storage?.close();
      await fake?.close();
    });

    /**
     * Loads the newest gateway process with WORKERS clients spread over `wallets` wallets, kills it
     * with SIGKILL after KILL_AFTER_PROVIDER_CALLS provider calls, and checks what the database kept.
     */
    async function killUnderLoad(wallets: number): Promise<void> {
      const gw = processes.at(-1)!;
      const FUNDED = 50_000_000;
      const payers: { wallet: string; headers: Record<string, string> }[] = [];
      for (let i = 0; i < wallets; i++) {
        const account = newAccount();
        await adjustBalance(storage.db, { wallet: account.address, amountUsdc: FUNDED, note: 'test funding' });
        const created = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
        assert.equal(created.status, 201, created.text);
        payers.push({ wallet: account.address.toLowerCase(), headers: { authorization: `Bearer ${created.body.key}`, 'content-type': 'application/json' } });
      }
      const calledBefore = fake.received.length;

      // Request ids of answers the client received in full: a JSON 200, or a stream up to [DONE].
      const answered: string[] = [];
      let killed = false;
      const worker = async (n: number) => {
        const { headers } = payers[n % wallets]!;
        for (let i = 0; !killed; i++) {
          const stream = (n + i) % 2 === 0;
          try {
            const res = await fetch(`${gw.url}/v1/chat/completions`, {
              method: 'POST',
              headers,
              body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: `hi ${n}/${i}` }], max_tokens: 50, stream }),
            });
            const text = await res.text();
            if (res.status !== 200) assert.fail(`unexpected ${res.status} before the kill: ${text}`);
            if (!stream || (text.endsWith('data: [DONE]\n\n') && !text.includes('"upstream_error"'))) answered.push(res.headers.get('x-request-id')!);
          } catch (err) {
            if (!killed) throw err;
          }
        }
      };
      const load = Promise.all(Array.from({ length: WORKERS }, (_, n) => worker(n)));
      while (fake.received.length < calledBefore + KILL_AFTER_PROVIDER_CALLS) await new Promise((r) => setTimeout(r, 5));
      killed = true;
      await gw.kill();
      await load;
      assert.ok(answered.length > 0, 'some requests completed before the kill');
      if (engine === 'postgres') await untilDeadSessionsEnd(storage);

      const addresses = payers.map((p) => p.wallet);
      const reservations = new Map(
        (await storage.db.selectFrom('reservations').select(['request_id', 'status']).where('wallet', 'in', addresses).execute()).map((r) => [
          r.request_id,
          r.status,
        ]),
      );
      const called = fake.received.slice(calledBefore).map((r) => r.headers['x-client-request-id'] as string);
      const unreserved = called.filter((id) => !reservations.has(id));
      assert.deepEqual(unreserved, [], 'the provider was called only for committed reservations');
      const usageRows = new Set(
        (await storage.db.selectFrom('request_usage').select('request_id').where('request_id', 'in', answered).execute()).map((r) => r.request_id),
      );
      const unsettled = answered.filter((id) => reservations.get(id) !== 'settled' || !usageRows.has(id));
      assert.deepEqual(unsettled, [], 'every answer the client received is settled and has its usage row');
      const pendingAtKill = [...reservations.values()].filter((s) => s === 'pending').length;

      // What the dead process left locked is released by the sweeper once its lease has run out.
      await sweepExpiredReservations(storage.db, Date.now() + 601_000);
      const ledger = await checkLedger(storage.db);
      assert.ok(ledger.ok, ledger.problems.join('\n'));
      for (const wallet of addresses) {
        const balance = await getBalance(storage.db, wallet);
        const charges = await storage.db
          .selectFrom('ledger_entries')
          .select((e) => e.fn.sum<number>('amount_usdc').as('sum'))
          .where('wallet', '=', wallet)
          .where('kind', '=', 'charge')
          .executeTakeFirst();
        assert.equal(balance.locked_usdc, 0, `all ${pendingAtKill} reservations pending at the kill are released`);
        assert.equal(balance.balance_usdc, FUNDED + Number(charges?.sum ?? 0), 'the balance is the funding minus the recorded charges');
      }

      // The same database serves again after the crash.
      const restarted = await startGatewayProcess(config(), env);
      processes.push(restarted);
      const before = (await getBalance(storage.db, addresses[0]!)).balance_usdc;
      const again = await call(
        restarted.url,
        'POST',
        '/v1/chat/completions',
        { model: 'fake/chat-small', messages: [{ role: 'user', content: 'after' }], max_tokens: 50 },
        payers[0]!.headers,
      );
      assert.equal(again.status, 200, again.text);
      assert.equal((await getBalance(storage.db, addresses[0]!)).balance_usdc, before - Number(again.headers.get('x-tollgate-charged-usdc')));
    }

    test('every provider call was reserved first, every answered request is settled, nothing is lost after the restart', () => killUnderLoad(1));

    // PostgreSQL's batches then span several wallets and both lanes when the process dies.
    test('attack: killed with the load spread over 6 wallets: the same, wallet by wallet', () => killUnderLoad(6));
  });
}
