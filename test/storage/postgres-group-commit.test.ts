import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { generateKey, insertKey } from '../../src/keys/api-keys.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { extendLeases } from '../../src/ledger/reservations.ts';
import { reserve, tryReserve } from '../../src/ledger/operations/reserve.ts';
import { isDatabaseOutage } from '../../src/storage/database-outage.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { PostgresGroupCommit } from '../../src/storage/postgres-group-commit.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';
import { until } from '../support/until.ts';

/**
 * PostgreSQL's group commit (src/storage/postgres-group-commit.ts, postgres-lanes.ts): the
 * reserves and finishes of one turn share one transaction per lane of wallets. Every rule of one
 * transaction per unit must still hold: exactly K of N admitted, a unit that throws fails alone,
 * no lock cycle reaches a caller, and a connection lost mid-batch commits nothing.
 */
describe('PostgreSQL group commit', () => {
  let url: string;
  let s: Storage;
  /** One lane: every unit sent at once is in the same batch, whatever its wallet. */
  let oneLane: Storage;
  /** Another session, as a top-up or an admin credit would hold one. */
  let outside: pg.Client;
  before(async () => {
    url = await freshDatabaseUrl('postgres');
    s = openStorage(url);
    await migrateToLatest(s);
    oneLane = openStorage(url, { ledgerWriters: 1 });
    outside = new pg.Client({ connectionString: url });
    await outside.connect();
  });
  after(async () => {
    await outside.end();
    await oneLane.close();
    await s.close();
  });

  const ledgerOk = () => assertLedgerConsistent(s.db);
  let n = 0;
  const id = () => `pgbatch-${++n}-${randomBytes(4).toString('hex')}`;
  const reserveOf = (storage: Storage, wallet: string, amountUsdc: number, requestId = id()) =>
    reserve(storage, { wallet, apiKeyId: 1, requestId, amountUsdc, leaseMs: 60_000 });

  /** Waits until another session's statement is waiting for a row lock; returns its backend's pid. */
  async function blockedOnALock(): Promise<number> {
    let pid = 0;
    await until(async () => {
      const { rows } = await outside.query(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()",
      );
      pid = rows[0]?.pid ?? 0;
      return pid !== 0;
    }, 'a batch waiting for a row lock');
    return pid;
  }

  describe('attack: many honest users at once', () => {
    test('30 wallets, 25 reserves each sent at once against room for 7: exactly 7 per wallet, balances exact', async () => {
      const wallets = await Promise.all(Array.from({ length: 30 }, () => fundedWallet(s.db, 75)));
      const sent = wallets.flatMap((w) => Array.from({ length: 25 }, () => ({ w, requestId: id() })));
      const admitted = await Promise.all(sent.map((r) => reserveOf(s, r.w, 10, r.requestId)));
      for (const w of wallets) {
        assert.equal(sent.filter((r, i) => r.w === w && admitted[i]).length, 7, `wallet ${w}`);
        assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 75, locked_usdc: 70, available_usdc: 5 });
      }
      await ledgerOk();
      // Settled all at once too, half of them charged: each wallet ends exactly 7 charges down.
      const outcomes = await Promise.all(
        sent.flatMap((r, i) => (admitted[i] ? [finishReservation(s, r.requestId, i % 2 ? 3 : 0, usageRecord(r.requestId, r.w))] : [])),
      );
      assert.equal(outcomes.filter((o) => o.applied).length, 30 * 7);
      for (const w of wallets) {
        const charged = sent.filter((r, i) => r.w === w && admitted[i] && i % 2).length * 3;
        assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 75 - charged, locked_usdc: 0, available_usdc: 75 - charged });
      }
      await ledgerOk();
    });

    test('one wallet, 200 reserves sent at once against room for 70: exactly 70, and a second finish of each changes nothing', async () => {
      const w = await fundedWallet(s.db, 700);
      const ids = Array.from({ length: 200 }, id);
      const admitted = await Promise.all(ids.map((requestId) => reserveOf(s, w, 10, requestId)));
      assert.equal(admitted.filter(Boolean).length, 70);
      const ok = ids.filter((_, i) => admitted[i]);
      // Every finish sent twice in the same batch: the second of each finds nothing pending.
      const outcomes = await Promise.all(ok.flatMap((requestId) => [1, 2].map(() => finishReservation(s, requestId, 4, usageRecord(requestId, w)))));
      assert.equal(outcomes.filter((o) => o.applied).length, 70);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 700 - 280, locked_usdc: 0, available_usdc: 420 });
      await ledgerOk();
    });
  });

  describe('the wire', () => {
    test('a batch of one-statement units leaves in one write: BEGIN, every statement and COMMIT, not a write per statement', async () => {
      const w = await fundedWallet(s.db, 1000);
      // Warm: the writer's connection is open and has prepared the reserve's statement.
      assert.equal(await reserveOf(oneLane, w, 1), true);
      const proto = net.Socket.prototype as unknown as Record<'_write' | '_writev', (...args: unknown[]) => unknown>;
      const { _write: write, _writev: writev } = proto;
      let writes = 0;
      proto._write = function (this: unknown, ...args: unknown[]) {
        writes++;
        return write.apply(this, args);
      };
      proto._writev = function (this: unknown, ...args: unknown[]) {
        writes++;
        return writev.apply(this, args);
      };
      let admitted: boolean[];
      try {
        admitted = await Promise.all(Array.from({ length: 20 }, () => reserveOf(oneLane, w, 1)));
      } finally {
        Object.assign(proto, { _write: write, _writev: writev });
      }
      assert.equal(admitted.filter(Boolean).length, 20);
      // One batch: BEGIN, the 20 statements and COMMIT in one write (pg alone wrote 22).
      assert.equal(writes, 1, `the batch took ${writes} writes`);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 21, available_usdc: 979 });
      await ledgerOk();
    });
  });

  describe('attack: a value the client cannot encode', () => {
    test('a statement whose parameter pg cannot encode fails its batch once; the lane goes on with a fresh connection', async () => {
      const w = await fundedWallet(s.db, 1000);
      // Warm: the lane's connection has prepared the reserve's statement.
      assert.equal(await reserveOf(oneLane, w, 1), true);
      const unencodable = {
        toPostgres: () => {
          throw new Error('cannot encode this value');
        },
      };
      const poisoned = oneLane.writeUnit((tx) => tx.run('UPDATE wallets SET updated_at = ? WHERE address = ?', [unencodable, w]), {
        wallet: w,
        oneStatement: true,
      });
      const beside = reserveOf(oneLane, w, 1);
      await assert.rejects(poisoned, /cannot encode this value/);
      // Its batch-mate may fail with it (the connection is dropped, not trusted again)…
      await beside.catch(() => undefined);
      // …but every batch after it runs, the same statement with a good value too: before, pg's
      // notion of what this connection had prepared no longer matched the server's, and every
      // later use of that statement on the lane failed ("prepared statement … does not exist").
      const touch = () =>
        oneLane.writeUnit((tx) => tx.run('UPDATE wallets SET updated_at = ? WHERE address = ?', [Date.now(), w]), { wallet: w, oneStatement: true });
      for (let round = 0; round < 3; round++) assert.deepEqual(await Promise.all([touch(), reserveOf(oneLane, w, 1)]), [1, true]);
      await ledgerOk();
    });
  });

  describe('attack: a key limit under a concurrent batch', () => {
    test('a key limit covering 7 admits exactly 7 of 100 in one batch, whether or not the caller knew of the limit', async () => {
      // A database of its own: the other tests count their reservations under key id 1.
      const own = openStorage(await freshDatabaseUrl('postgres'), { ledgerWriters: 1 });
      after(() => own.close());
      await migrateToLatest(own);
      const w = await fundedWallet(own.db, 1_000_000);
      const key = await insertKey(own.db, w, generateKey(randomBytes(32)), 'limited');
      await own.db.updateTable('api_keys').set({ spend_limit_usdc: 75, spend_limit_period: 'total' }).where('id', '=', key.id).execute();
      // Half the callers hold a stale cached key without its limit: they take the one-statement
      // path first, which must refuse and leave the decision to the limit check.
      const outcomes = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          tryReserve(own, { wallet: w, apiKeyId: key.id, requestId: id(), amountUsdc: 10, leaseMs: 60_000, keyHasLimit: i % 2 === 0 }),
        ),
      );
      assert.equal(outcomes.filter((o) => o.ok).length, 7);
      assert.ok(outcomes.every((o) => o.ok || o.refused === 'key_limit'));
      assert.deepEqual(await getBalance(own.db, w), { balance_usdc: 1_000_000, locked_usdc: 70, available_usdc: 1_000_000 - 70 });
      await assertLedgerConsistent(own.db);
    });
  });

  describe('attack: a unit that fails inside a batch', () => {
    test('a unit that throws after writing fails alone; its batch-mates commit', async () => {
      const w = await fundedWallet(s.db, 1000);
      const throwing = oneLane.writeUnit(
        async (tx) => {
          await tx.run('UPDATE wallets SET locked_usdc = locked_usdc + 500 WHERE address = ?', [w]);
          throw new Error('this unit fails after its write');
        },
        { wallet: w },
      );
      const [a, bad, c] = await Promise.allSettled([reserveOf(oneLane, w, 100), throwing, reserveOf(oneLane, w, 300)]);
      assert.deepEqual([a.status, c.status], ['fulfilled', 'fulfilled']);
      assert.match(String((bad as PromiseRejectedResult).reason), /fails after its write/);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 400, available_usdc: 600 });
      await ledgerOk();
    });

    test('a one-statement unit refused before its statement is sent fails alone while the others commit', async () => {
      const w = await fundedWallet(s.db, 1000);
      const refused = oneLane.writeUnit(
        async () => {
          throw new Error('no value for a parameter');
        },
        { wallet: w, oneStatement: true },
      );
      const [a, bad, c] = await Promise.allSettled([reserveOf(oneLane, w, 100), refused, reserveOf(oneLane, w, 300)]);
      assert.deepEqual([a.status, bad.status, c.status], ['fulfilled', 'rejected', 'fulfilled']);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 400, available_usdc: 600 });
      await ledgerOk();
    });

    test('a statement the server refuses in a batch whose COMMIT left with it: nothing commits with it, the others run again and commit', async () => {
      const w = await fundedWallet(s.db, 1000);
      // Warm, so the three statements below are one batch on a connection that has them prepared.
      assert.equal(await reserveOf(oneLane, w, 1), true);
      const sent: string[] = [];
      const query = pg.Client.prototype.query as (...a: unknown[]) => Promise<unknown>;
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        sent.push(typeof args[0] === 'string' ? args[0] : 'statement');
        return query.apply(this, args);
      } as typeof pg.Client.prototype.query;
      let results: PromiseSettledResult<unknown>[];
      try {
        // Breaks the wallet's check (locked within the balance): the server refuses it.
        const refused = oneLane.writeUnit((tx) => tx.run('UPDATE wallets SET locked_usdc = balance_usdc + 1 WHERE address = ?', [w]), {
          wallet: w,
          oneStatement: true,
          nothingAfterStatement: true,
        });
        results = await Promise.allSettled([reserveOf(oneLane, w, 100), refused, reserveOf(oneLane, w, 300)]);
      } finally {
        pg.Client.prototype.query = query as typeof pg.Client.prototype.query;
      }
      // The first attempt sent COMMIT behind the three statements, before any of them answered.
      assert.deepEqual(sent.slice(0, 5), ['BEGIN', 'statement', 'statement', 'statement', 'COMMIT']);
      assert.deepEqual(
        results.map((r) => r.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 401, available_usdc: 599 });
      await ledgerOk();
    });

    test('a unit that catches its own failed statement is not told it committed', async () => {
      // PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK and no error.
      const w = await fundedWallet(s.db, 1000);
      const swallowing = oneLane.writeUnit(
        async (tx) => {
          await tx.run('UPDATE wallets SET locked_usdc = locked_usdc + 5 WHERE address = ?', [w]);
          await tx.run('UPDATE wallets SET locked_usdc = balance_usdc + 1 WHERE address = ?', [w]).catch(() => 0);
          return 'committed?';
        },
        { wallet: w },
      );
      const [a, bad] = await Promise.allSettled([reserveOf(oneLane, w, 100), swallowing]);
      assert.equal(a.status, 'fulfilled');
      assert.equal(bad.status, 'rejected');
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 100, available_usdc: 900 });
      await ledgerOk();
    });
  });

  describe('attack: lock cycles', () => {
    test('a batch and an outside transaction lock two wallets in opposite orders: PostgreSQL aborts one, and no batch caller sees it', async () => {
      const [w1, w2] = [await fundedWallet(s.db, 1000), await fundedWallet(s.db, 1000)];
      await outside.query('BEGIN');
      await outside.query('UPDATE wallets SET updated_at = updated_at WHERE address = $1', [w2]);
      // One batch: w1 first (locked at once), then w2 (waits for the outside transaction).
      const batch = Promise.allSettled([reserveOf(oneLane, w1, 100), reserveOf(oneLane, w2, 200)]);
      await blockedOnALock();
      // The batch waits first, so its deadlock check fires first and PostgreSQL aborts it (40P01).
      const outsideDone = outside
        .query('UPDATE wallets SET updated_at = updated_at WHERE address = $1', [w1])
        .then(() => outside.query('COMMIT'))
        .catch(async (err) => {
          await outside.query('ROLLBACK');
          return err;
        });
      const results = await batch;
      await outsideDone;
      assert.deepEqual(
        results.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason))),
        [true, true],
      );
      assert.deepEqual(await getBalance(s.db, w1), { balance_usdc: 1000, locked_usdc: 100, available_usdc: 900 });
      assert.deepEqual(await getBalance(s.db, w2), { balance_usdc: 1000, locked_usdc: 200, available_usdc: 800 });
      await ledgerOk();
    });
    test('lease renewal while a batch finishes the same requests: it skips the rows the batch holds instead of closing a cycle', async () => {
      const w = await fundedWallet(s.db, 1000);
      const other = await fundedWallet(s.db, 1000);
      const [r1, r2] = [id(), id()];
      assert.equal(await reserveOf(oneLane, w, 10, r1), true);
      assert.equal(await reserveOf(oneLane, w, 10, r2), true);
      await outside.query('BEGIN');
      await outside.query('UPDATE wallets SET updated_at = updated_at WHERE address = $1', [other]);
      // One batch: finish r1 (its row now locked by the batch), then wait for the outside lock, then finish r2.
      const batch = Promise.all([
        finishReservation(oneLane, r1, 3, usageRecord(r1, w)),
        reserveOf(oneLane, other, 10),
        finishReservation(oneLane, r2, 3, usageRecord(r2, w)),
      ]);
      await blockedOnALock();
      // Without SKIP LOCKED the renewal would hold r2 and wait for r1; the batch, once let go, would
      // wait for r2: a cycle. It must return while the batch still waits.
      const renewed = await Promise.race([
        extendLeases(s, [r2, r1], 600_000).then(() => 'returned'),
        new Promise((r) => setTimeout(() => r('waited for the batch'), 3000)),
      ]);
      await outside.query('COMMIT');
      const [f1, reservedOther, f2] = await batch;
      assert.equal(renewed, 'returned');
      assert.deepEqual([f1.applied, reservedOther, f2.applied], [true, true, true]);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 994, locked_usdc: 0, available_usdc: 994 });
      await ledgerOk();
    });
  });

  describe('attack: two instances on one database', () => {
    test('both send the same ten wallets at once, in opposite orders, five times: no lock cycle, balances exact', async () => {
      const [a, b] = [openStorage(url, { ledgerWriters: 1 }), openStorage(url, { ledgerWriters: 1 })];
      // Every batch that failed, by its error's SQLSTATE: a deadlock (40P01) would be rolled back
      // and rerun, invisible to the callers, so it is looked for here.
      const failures: string[] = [];
      const proto = PostgresGroupCommit.prototype as unknown as { transaction: (...a: unknown[]) => Promise<{ ok: boolean; err?: { code?: string } }> };
      const transaction = proto.transaction;
      proto.transaction = async function (this: unknown, ...args: unknown[]) {
        const outcome = await transaction.apply(this, args);
        if (!outcome.ok) failures.push(String(outcome.err?.code));
        return outcome;
      };
      try {
        const wallets = await Promise.all(Array.from({ length: 10 }, () => fundedWallet(s.db, 1000)));
        for (let round = 0; round < 5; round++) {
          const sent = await Promise.all([...wallets.map((w) => reserveOf(a, w, 10)), ...[...wallets].reverse().map((w) => reserveOf(b, w, 10))]);
          assert.ok(sent.every(Boolean));
        }
        for (const w of wallets) assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 100, available_usdc: 900 });
        assert.deepEqual(failures, [], 'no batch failed (a lock cycle would show as 40P01)');
        await ledgerOk();
      } finally {
        proto.transaction = transaction;
        await Promise.all([a.close(), b.close()]);
      }
    });
  });

  describe('attack: the database goes away mid-batch', () => {
    test('the batch connection is killed while it waits: every caller is rejected as an outage, nothing is half-written', async () => {
      const w = await fundedWallet(s.db, 1000);
      const settled = await fundedWallet(s.db, 1000);
      const pending = id();
      assert.equal(await reserveOf(oneLane, settled, 50, pending), true);
      await outside.query('BEGIN');
      await outside.query('UPDATE wallets SET updated_at = updated_at WHERE address = $1', [w]);
      // One batch: a finish that goes through at once, then reserves that wait for the lock.
      const ids = Array.from({ length: 5 }, id);
      const batch = Promise.allSettled([
        finishReservation(oneLane, pending, 20, usageRecord(pending, settled)),
        ...ids.map((requestId) => reserveOf(oneLane, w, 10, requestId)),
      ]);
      const pid = await blockedOnALock();
      await outside.query('SELECT pg_terminate_backend($1)', [pid]);
      const results = await batch;
      await outside.query('ROLLBACK');
      for (const r of results) {
        assert.equal(r.status, 'rejected');
        assert.ok(isDatabaseOutage((r as PromiseRejectedResult).reason), String((r as PromiseRejectedResult).reason));
      }
      // The finish ran first in the batch, and is rolled back with it.
      assert.deepEqual(await getBalance(s.db, settled), { balance_usdc: 1000, locked_usdc: 50, available_usdc: 950 });
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 0, available_usdc: 1000 });
      assert.equal((await s.db.selectFrom('reservations').select('id').where('request_id', 'in', ids).execute()).length, 0);
      await ledgerOk();
      // The killed connection left the pool: the next batch runs on a live one.
      assert.equal((await finishReservation(oneLane, pending, 20, usageRecord(pending, settled))).applied, true);
      assert.equal(await reserveOf(oneLane, w, 10), true);
      await ledgerOk();
    });

    test('the connection is lost right after COMMIT: every caller gets the error, and no unit runs a second time', async () => {
      const w = await fundedWallet(s.db, 1000);
      const pending = id();
      assert.equal(await reserveOf(oneLane, w, 50, pending), true);
      // The server took the COMMIT, then the answer was lost (ECONNRESET): the batch committed, and
      // only the rule "never rerun after COMMIT" keeps the finish from answering "nothing to do"
      // and the reserve from running again.
      const query = pg.Client.prototype.query as (...a: unknown[]) => Promise<unknown>;
      let armed = true;
      pg.Client.prototype.query = async function (this: pg.Client, ...args: unknown[]) {
        const result = await query.apply(this, args);
        if (armed && args[0] === 'COMMIT') {
          armed = false;
          throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
        }
        return result;
      } as typeof pg.Client.prototype.query;
      const fresh = id();
      let results: PromiseSettledResult<unknown>[];
      try {
        results = await Promise.allSettled([finishReservation(oneLane, pending, 20, usageRecord(pending, w)), reserveOf(oneLane, w, 10, fresh)]);
      } finally {
        pg.Client.prototype.query = query as typeof pg.Client.prototype.query;
      }
      assert.deepEqual(
        results.map((r) => r.status),
        ['rejected', 'rejected'],
      );
      assert.ok(results.every((r) => isDatabaseOutage((r as PromiseRejectedResult).reason)));
      // Both committed, once: the settle charged 20 and the new reservation holds 10.
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 980, locked_usdc: 10, available_usdc: 970 });
      await ledgerOk();
      await finishReservation(oneLane, fresh, 0, usageRecord(fresh, w));
      await ledgerOk();
    });

    test('the batch code throws midway (a bug): its connection is destroyed, never pooled inside the open transaction', async () => {
      const w = await fundedWallet(s.db, 1000);
      // BEGIN and a write reach the server, then the batch code throws: returned to the pool, the
      // connection would hold the wallet's row lock and the next batch would commit the +7.
      const proto = PostgresGroupCommit.prototype as unknown as { attempt: (client: pg.PoolClient, ...rest: unknown[]) => Promise<unknown> };
      const attempt = proto.attempt;
      proto.attempt = async (client: pg.PoolClient) => {
        proto.attempt = attempt;
        await client.query('BEGIN');
        await client.query('UPDATE wallets SET locked_usdc = locked_usdc + 7 WHERE address = $1', [w]);
        throw new Error('a bug in the batch code');
      };
      try {
        await assert.rejects(reserveOf(oneLane, w, 10), /a bug in the batch code/);
      } finally {
        proto.attempt = attempt;
      }
      // A destroyed connection's server session ends when PostgreSQL notices the closed socket, a moment later on a
      // loaded machine; a connection pooled inside its transaction would stay 'idle in transaction' for good.
      const idleInTransaction = async () =>
        (await outside.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'")).rows[0]
          .n as number;
      await until(async () => (await idleInTransaction()) === 0, "no session left inside the failed batch's transaction", 10_000);
      assert.equal(await reserveOf(oneLane, w, 10), true);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 10, available_usdc: 990 });
      await ledgerOk();
    });
  });
});
