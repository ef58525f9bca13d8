import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import { sql } from 'kysely';
import { generateKey, insertKey } from '../../src/keys/api-keys.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { param, postgresStatement } from '../../src/ledger/effects/statement.ts';
import { reserve, tryReserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { laneOf } from '../../src/storage/postgres-lanes.ts';
import { PostgresGroupCommit } from '../../src/storage/postgres-group-commit.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet } from '../support/ledger.ts';

/**
 * Attacks on PostgreSQL group commit. Each describe is one break; the tests state what
 * docs/DECISIONS.md (group commit) and the code's comments promise, and what closes each break
 * (postgres-group-commit.ts: wallet order across the whole batch, COMMIT after every unit
 * answered, synchronous throws as rejections, a batch deadline).
 */
describe('attack: PostgreSQL group commit (r9/pgbatch review)', () => {
  let url: string;
  let s: Storage;
  let oneLane: Storage;
  before(async () => {
    url = await freshDatabaseUrl('postgres');
    s = openStorage(url);
    await migrateToLatest(s);
    oneLane = openStorage(url, { ledgerWriters: 1 });
  });
  after(async () => {
    await oneLane.close();
    await s.close();
  });

  let n = 0;
  const id = () => `attack-${++n}-${randomBytes(4).toString('hex')}`;
  const reserveOf = (storage: Storage, wallet: string, amountUsdc: number, requestId = id()) =>
    reserve(storage, { wallet, apiKeyId: 1, requestId, amountUsdc, leaseMs: 60_000 });
  const reservationExists = async (requestId: string) =>
    (await s.db.selectFrom('reservations').select('id').where('request_id', '=', requestId).execute()).length === 1;

  describe('attack: a one-statement unit refused before its statement is written (missing parameter) throws synchronously', () => {
    // The promise: "A one-statement unit whose values are refused before its statement is
    // written (a missing parameter) fails alone while its batch-mates commit (failedAlone)".
    // Statement.run computes params() synchronously, and the reserve's unit is the non-async
    // `(tx) => RESERVE_IN_ONE_STATEMENT.run(tx, v)`; such a unit throws out of transaction()'s
    // flatMap after BEGIN and its batch-mates' statements were written, before COMMIT. The
    // batch connection goes back to the pool open, inside that transaction, holding the wallet's
    // row lock; every caller is rejected; and the next batch on that connection commits the
    // rejected callers' writes (BEGIN inside a transaction is only a warning).
    const MISSING = postgresStatement(`SELECT 1 AS one WHERE ${param('needed')}::int = 1`);

    test('its batch-mates commit and are told so; nothing a rejected caller sent is committed later', async () => {
      const w = await fundedWallet(s.db, 1000);
      const [a, c] = [id(), id()];
      const bad = oneLane.writeUnit((tx) => MISSING.run(tx, {}), { wallet: w, oneStatement: true });
      const results = await Promise.allSettled([reserveOf(oneLane, w, 100, a), bad, reserveOf(oneLane, w, 300, c)]);
      // Every caller has been answered: no session may still hold the wallet's row (another
      // instance's batch, a top-up or the sweeper would wait on it).
      const held = await sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`.execute(
        s.db,
      );
      const idleInTx = (held.rows[0] as { n: number }).n;
      // The next batch on the same lane (and, with one writer, the same pool connection).
      const later = await Promise.race([
        reserveOf(oneLane, w, 1).then(String, (e) => `rejected: ${e}`),
        new Promise((r) => setTimeout(() => r('hung for 10 s'), 10_000)),
      ]);
      const told = results.map((r) => r.status);
      const inDb = [await reservationExists(a), await reservationExists(c)];
      assert.deepEqual(
        { told, later, idleInTx },
        { told: ['fulfilled', 'rejected', 'fulfilled'], later: 'true', idleInTx: 0 },
        `reservations in the database for a and c: ${inDb}`,
      );
      // Whatever the callers were told, the database must agree with it.
      assert.deepEqual(
        inDb,
        [results[0]!.status === 'fulfilled', results[2]!.status === 'fulfilled'],
        'a caller told "failed" whose reservation was committed by the next batch',
      );
      await assertLedgerConsistent(s.db);
    });
  });

  describe('attack: a one-statement unit that fails after its statement ran', () => {
    // A database of its own (the describe above may leave a stray write in the shared one).
    let s: Storage;
    let oneLane: Storage;
    before(async () => {
      const own = await freshDatabaseUrl('postgres');
      s = openStorage(own);
      await migrateToLatest(s);
      oneLane = openStorage(own, { ledgerWriters: 1 });
    });
    after(async () => {
      await oneLane.close();
      await s.close();
    });
    const lockedOf = async (w: string) => (await getBalance(s.db, w))?.locked_usdc;
    // write-units.ts: "All or nothing: a unit either commits every statement it ran, or none of
    // them (it threw)". In the pipelined path any rejection of a one-statement unit goes into
    // failedAlone, and the batch commits: a unit whose statement executed and then threw (a
    // second statement, which oneStatement() refuses, or any JS error after the first) is told it
    // failed while its first statement is committed.
    test('a one-statement unit that runs a second statement: told it failed, and its first statement is not committed', async () => {
      const w = await fundedWallet(s.db, 1000);
      const unit = oneLane.writeUnit(
        async (tx) => {
          await tx.run('UPDATE wallets SET locked_usdc = locked_usdc + 500 WHERE address = ?', [w]);
          await tx.run('UPDATE wallets SET locked_usdc = locked_usdc - 500 WHERE address = ?', [w]);
          return 'done';
        },
        { wallet: w, oneStatement: true },
      );
      const [r] = await Promise.allSettled([unit, reserveOf(oneLane, w, 10)]);
      assert.equal(r!.status, 'rejected');
      // All or nothing: the caller was told it failed, so its +500 must not be in the wallet.
      assert.equal(await lockedOf(w), 10, "the failed unit's first statement was committed (500 locked with no reservation)");
      await assertLedgerConsistent(s.db);
    });

    test('a one-statement unit that throws after its statement: its write is rolled back', async () => {
      const w = await fundedWallet(s.db, 1000);
      const unit = oneLane.writeUnit(
        async (tx) => {
          const changed = await tx.run('UPDATE wallets SET locked_usdc = locked_usdc + 200 WHERE address = ?', [w]);
          if (changed === 1) throw new Error('the unit decides to fail after its statement');
          return changed;
        },
        { wallet: w, oneStatement: true },
      );
      const [r] = await Promise.allSettled([unit]);
      assert.equal(r!.status, 'rejected');
      assert.equal(await lockedOf(w), 0, 'a unit told "failed" whose write committed');
    });
  });

  describe('attack: two instances, pipelined units then one-by-one units: wallets not taken in one ascending order', () => {
    // docs/DECISIONS.md (group commit): every batch takes wallet locks in ascending order, so two
    // instances' batches cannot close a cycle. But transaction() sends every
    // one-statement unit first (pipelined) and only then runs the others (a reserve under a key
    // with a limit, a late charge) in wallet order again: a batch [plain reserve on w2, limited
    // reserve on w1] locks w2 then w1. Another instance's batch [plain reserve on w1, limited on w2]
    // locks w1 then w2: a lock cycle, a deadlock_timeout (1 s) stall and a 40P01 rerun each time.
    test('plain and limit-checked reserves of two wallets, sent from two instances in mirrored roles, five times: no lock cycle', async () => {
      // A database of its own, so its ledger check sees only its own writes.
      const own = await freshDatabaseUrl('postgres');
      const setup = openStorage(own);
      await migrateToLatest(setup);
      after(() => setup.close());
      const [a, b] = [openStorage(own, { ledgerWriters: 1 }), openStorage(own, { ledgerWriters: 1 })];
      const failures: string[] = [];
      const proto = PostgresGroupCommit.prototype as unknown as { transaction: (...args: unknown[]) => Promise<{ ok: boolean; err?: { code?: string } }> };
      const transaction = proto.transaction;
      proto.transaction = async function (this: unknown, ...args: unknown[]) {
        const outcome = await transaction.apply(this, args);
        if (!outcome.ok) failures.push(String(outcome.err?.code));
        return outcome;
      };
      const started = Date.now();
      try {
        for (let round = 0; round < 5; round++) {
          const [w1, w2] = [await fundedWallet(setup.db, 1000), await fundedWallet(setup.db, 1000)].sort();
          const limited = (st: Storage, w: string) =>
            tryReserve(st, { wallet: w, apiKeyId: 1, requestId: id(), amountUsdc: 10, leaseMs: 60_000, keyHasLimit: true }).then((o) => o.ok);
          const sent = await Promise.all([reserveOf(a, w2!, 10), limited(a, w1!), reserveOf(b, w1!, 10), limited(b, w2!)]);
          assert.ok(sent.every(Boolean));
          assert.equal((await getBalance(setup.db, w1!))?.locked_usdc, 20);
          assert.equal((await getBalance(setup.db, w2!))?.locked_usdc, 20);
        }
        assert.deepEqual(failures, [], `no batch failed (a lock cycle shows as 40P01); 5 rounds took ${Date.now() - started} ms`);
        await assertLedgerConsistent(setup.db);
      } finally {
        proto.transaction = transaction;
        await Promise.all([a.close(), b.close()]);
      }
    });
  });

  describe('attack: a batch connection that stops answering (half-open TCP) blocks its whole lane', () => {
    // One batch at a time per lane, on one held connection, with no query_timeout and TCP
    // keep-alive at the OS default (2 h): a batch whose connection goes silent (a NAT or
    // failover dropping the flow without a RST) never settles, and every later unit of every
    // wallet in that lane queues behind it for ever. On main each reserve took its own pool
    // connection: one stuck connection stalled only the request on it.
    test('a reserve on another wallet, sent after the batch connection froze, is answered within 15 s', { timeout: 60_000 }, async () => {
      const target = new URL(url);
      const frozen = new Set<Socket>();
      const sockets = new Set<Socket>();
      const relay = createServer((client) => {
        const upstream = createConnection({ host: target.hostname || '127.0.0.1', port: Number(target.port || 5432) });
        for (const x of [client, upstream]) {
          sockets.add(x);
          x.on('error', () => undefined);
        }
        client.on('data', (d) => frozen.has(client) || upstream.write(d));
        upstream.on('data', (d) => frozen.has(client) || client.write(d));
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      await new Promise<void>((r) => relay.listen(0, '127.0.0.1', () => r()));
      const relayed = new URL(url);
      relayed.hostname = '127.0.0.1';
      relayed.port = String((relay.address() as AddressInfo).port);
      const gw = openStorage(relayed.toString(), { ledgerWriters: 1 });
      try {
        const [w1, w2] = [await fundedWallet(s.db, 1000), await fundedWallet(s.db, 1000)];
        assert.equal(await reserveOf(gw, w1, 10), true, 'the writer connection is up');
        // The flow goes silent: nothing relayed either way from now on, no FIN, no RST.
        for (const x of sockets) frozen.add(x);
        const stuck = reserveOf(gw, w1, 10).then(String, (e) => `rejected: ${e}`);
        stuck.catch(() => undefined);
        await new Promise((r) => setTimeout(r, 200));
        const next = await Promise.race([
          reserveOf(gw, w2, 10).then(String, (e) => `rejected: ${e}`),
          new Promise((r) => setTimeout(() => r('no answer after 15 s'), 15_000)),
        ]);
        assert.notEqual(next, 'no answer after 15 s', 'every later unit of the lane waits behind the silent batch');
      } finally {
        for (const x of sockets) x.destroy();
        relay.close();
        await gw.close().catch(() => undefined);
      }
    });
  });

  describe('attack: two instances, exactly K of N (holds)', () => {
    test('a key limit covering 7 and a balance covering 9: 7 of 120 admitted across two instances, stale and fresh hints mixed', async () => {
      const own = await freshDatabaseUrl('postgres');
      const setup = openStorage(own);
      await migrateToLatest(setup);
      const [a, b] = [openStorage(own), openStorage(own, { ledgerWriters: 1 })];
      try {
        const w = await fundedWallet(setup.db, 90);
        const other = await fundedWallet(setup.db, 90);
        const key = await insertKey(setup.db, w, generateKey(randomBytes(32)), 'limited');
        await setup.db.updateTable('api_keys').set({ spend_limit_usdc: 75, spend_limit_period: 'total' }).where('id', '=', key.id).execute();
        const sent = Array.from({ length: 120 }, (_, i) =>
          tryReserve(i % 2 ? a : b, { wallet: w, apiKeyId: key.id, requestId: id(), amountUsdc: 10, leaseMs: 60_000, keyHasLimit: i % 3 === 0 }),
        );
        // Another wallet's plain reserves share the batches: room for 9.
        const otherKey = await insertKey(setup.db, other, generateKey(randomBytes(32)), 'plain');
        const plain = Array.from({ length: 40 }, (_, i) =>
          reserve(i % 2 ? a : b, { wallet: other, apiKeyId: otherKey.id, requestId: id(), amountUsdc: 10, leaseMs: 60_000 }),
        );
        const [outcomes, plainOk] = await Promise.all([Promise.all(sent), Promise.all(plain)]);
        assert.equal(outcomes.filter((o) => o.ok).length, 7);
        assert.equal(plainOk.filter(Boolean).length, 9);
        assert.deepEqual(await getBalance(setup.db, w), { balance_usdc: 90, locked_usdc: 70, available_usdc: 20 });
        await assertLedgerConsistent(setup.db);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await setup.close();
      }
    });
  });

  describe('attack: exactly K of N while batches keep rolling back and rerunning alone (holds)', () => {
    test('two instances, one wallet with room for 70, 600 reserves and 20 failing units interleaved: exactly 70', async () => {
      // A database of its own: a break in the tests above leaves wrongly committed writes in theirs.
      const own = await freshDatabaseUrl('postgres');
      const setup = openStorage(own);
      await migrateToLatest(setup);
      const [a, b] = [openStorage(own), openStorage(own)];
      try {
        const w = await fundedWallet(setup.db, 700);
        const failing = () =>
          (Math.random() < 0.5 ? a : b).writeUnit(
            async (tx) => {
              await tx.run('UPDATE wallets SET locked_usdc = locked_usdc + 1 WHERE address = ?', [w]);
              throw new Error('poison');
            },
            { wallet: w },
          );
        const sent = Array.from({ length: 600 }, (_, i) =>
          i % 30 === 0
            ? failing().then(
                () => 'poison-ok',
                () => 'poison',
              )
            : reserveOf(i % 2 ? a : b, w, 10),
        );
        const out = await Promise.all(sent);
        assert.equal(out.filter((x) => x === true).length, 70);
        assert.ok(out.filter((x) => typeof x === 'string').every((x) => x === 'poison'));
        assert.deepEqual(await getBalance(setup.db, w), { balance_usdc: 700, locked_usdc: 700, available_usdc: 0 });
        await assertLedgerConsistent(setup.db);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await setup.close();
      }
    });
  });

  test('(helper check) laneOf is stable', () => assert.equal(laneOf('0xAB', 2), laneOf('0xab', 2)));
});
