import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { after, before, describe, test } from 'node:test';
import type PgModule from 'pg';
import { sql } from 'kysely';
import pino from 'pino';
import { generateKey, insertKey } from '../../src/keys/api-keys.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { reserve, tryReserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { PostgresGroupCommit } from '../../src/storage/postgres-group-commit.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { CommitOutcomeUnknown, NotCommitted } from '../../src/storage/commit-outcome.ts';
import { isDatabaseOutage } from '../../src/storage/database-outage.ts';
import { unavailableDependency } from '../../src/http/errors.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { createDurableSettler } from '../../src/ledger/spool/durable-settle.ts';
import { SettleSpool } from '../../src/ledger/spool/spool-file.ts';
import { tempDir } from '../support/engines.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

const pg = createRequire(import.meta.url)('pg') as typeof PgModule;

/**
 * Review of the pipelined lane (src/storage/postgres-group-commit.ts: up to COMMITS_IN_FLIGHT
 * transactions of at most MAX_UNITS_PER_COMMIT units on one connection). Every attack checks the
 * money after: each reserve that resolved is in the database, each one refused with a known
 * outcome is not, the wallet's locked funds are exactly its reservations, and the ledger check is clean.
 */
describe('attack: PostgreSQL pipelined group commit (r13/pgreview)', () => {
  let url: string;
  let s: Storage;
  before(async () => {
    url = await freshDatabaseUrl('postgres');
    s = openStorage(url);
    await migrateToLatest(s);
    // The reserves below name key 1 without a limit; a key created later with a limit must not share its spend.
    await insertKey(s.db, await fundedWallet(s.db, 1), generateKey(randomBytes(32)), 'key 1, unlimited');
  });
  after(() => s.close());

  let n = 0;
  const id = () => `review-${++n}-${randomBytes(4).toString('hex')}`;

  interface Outcome {
    requestId: string;
    wallet: string;
    amount: number;
    ok: boolean;
    err?: Error & { code?: string };
  }

  /** Reserves, each recorded with what its caller was told. */
  function reserveAll(storage: Storage, wallets: string[], count: number, amount = 10, leaseMs = 60_000): Promise<Outcome[]> {
    return Promise.all(
      Array.from({ length: count }, (_, i) => {
        const wallet = wallets[i % wallets.length]!;
        const requestId = id();
        return reserve(storage, { wallet, apiKeyId: 1, requestId, amountUsdc: amount, leaseMs }).then(
          (ok) => ({ requestId, wallet, amount, ok }),
          (err: Error) => ({ requestId, wallet, amount, ok: false, err }),
        );
      }),
    );
  }

  /**
   * What the callers were told agrees with the database. `unknownOutcome`: a rejection the caller may
   * not rely on either way (the connection was lost with a COMMIT on the wire), so it may be present.
   */
  async function assertToldMatchesDatabase(outcomes: Outcome[], unknownOutcome: (o: Outcome) => boolean = () => false) {
    const ids = outcomes.map((o) => o.requestId);
    const rows = await s.db.selectFrom('reservations').select(['request_id', 'wallet', 'amount_usdc']).where('request_id', 'in', ids).execute();
    const present = new Set(rows.map((r) => r.request_id));
    const missing = outcomes.filter((o) => o.ok && !present.has(o.requestId));
    const refusedButPresent = outcomes.filter((o) => !o.ok && o.err && !unknownOutcome(o) && present.has(o.requestId));
    const refusedWithoutError = outcomes.filter((o) => !o.ok && !o.err && present.has(o.requestId));
    assert.deepEqual(
      { missing: missing.length, refusedButPresent: refusedButPresent.map((o) => o.err?.message), refusedWithoutError: refusedWithoutError.length },
      { missing: 0, refusedButPresent: [], refusedWithoutError: 0 },
    );
    assert.ok(rows.length <= outcomes.length);
    // Locked funds are exactly the reservations (nothing applied twice, nothing lost).
    for (const wallet of new Set(outcomes.map((o) => o.wallet))) {
      const locked = (await getBalance(s.db, wallet)).locked_usdc;
      const reserved = await s.db
        .selectFrom('reservations')
        .select(sql<number>`coalesce(sum(amount_usdc), 0)::bigint`.as('sum'))
        .where('wallet', '=', wallet)
        .executeTakeFirstOrThrow();
      assert.equal(locked, Number(reserved.sum), `wallet ${wallet}: locked equals its reservations`);
    }
    await assertLedgerConsistent(s.db);
  }

  /** Runs its statement, then throws: its transaction rolls back and each unit of it runs again alone. */
  const poisoned = (storage: Storage, wallet: string, requestId = id()): Promise<Outcome> =>
    storage
      .writeUnit(
        async (tx) => {
          await tx.run('UPDATE wallets SET locked_usdc = locked_usdc + 7 WHERE address = ?', [wallet]);
          throw new Error('poison');
        },
        { wallet },
      )
      .then(
        () => ({ requestId, wallet, amount: 7, ok: true }),
        (err: Error) => ({ requestId, wallet, amount: 7, ok: false, err }),
      );

  /** Resolves once the group commit has answered `count` transactions. */
  function afterBatches(count: number): Promise<void> {
    return new Promise((resolve) => {
      let seen = 0;
      const listen = () => {
        if (++seen === count) {
          unsubscribe('tollgate:group-commit', listen);
          resolve();
        }
      };
      subscribe('tollgate:group-commit', listen);
    });
  }

  /** A lane over its own pipelined pool, with its connection's socket reachable, as storage for the ledger's operations. */
  function ownLane() {
    const pool = new pg.Pool({ connectionString: url, max: 1, pipeline: true } as PgModule.PoolConfig);
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    const lane = new PostgresGroupCommit(pool);
    const storage: Storage = { db: s.db, engine: 'postgres', writeUnit: lane.submit, close: () => pool.end() };
    const clients: PgModule.PoolClient[] = [];
    const connect = pool.connect.bind(pool) as () => Promise<PgModule.PoolClient>;
    (pool as unknown as { connect: () => Promise<PgModule.PoolClient> }).connect = async () => {
      const client = await connect();
      clients.push(client);
      return client;
    };
    return { pool, storage, clients };
  }

  const socketOf = (client: PgModule.PoolClient) =>
    (client as unknown as { connection: { stream: { write: (chunk: Buffer, ...rest: unknown[]) => boolean; destroy(): void } } }).connection.stream;

  describe('attack: a unit throwing after its statement in batch k while later batches are in flight', () => {
    test('poisoned units of several wallets in a backlog of 1,000: only they fail, reruns alone land in no other transaction', async () => {
      const oneLane = openStorage(url, { ledgerWriters: 1 });
      try {
        const wallets = [await fundedWallet(s.db, 100_000), await fundedWallet(s.db, 100_000), await fundedWallet(s.db, 100_000)];
        const outcomes: Promise<Outcome>[] = [];
        for (let i = 0; i < 1000; i++) {
          const wallet = wallets[i % 3]!;
          const requestId = id();
          if (i % 97 === 11) {
            outcomes.push(poisoned(oneLane, wallet, requestId));
          } else if (i % 13 === 5) {
            outcomes.push(
              tryReserve(oneLane, { wallet, apiKeyId: 1, requestId, amountUsdc: 10, leaseMs: 60_000, keyHasLimit: true }).then(
                (o) => ({ requestId, wallet, amount: 10, ok: o.ok }),
                (err: Error) => ({ requestId, wallet, amount: 10, ok: false, err }),
              ),
            );
          } else {
            outcomes.push(reserveAll(oneLane, [wallet], 1).then(([o]) => o as Outcome));
          }
        }
        const done = await Promise.all(outcomes);
        const refused = done.filter((o) => o.amount === 7);
        assert.ok(refused.every((o) => !o.ok && o.err?.message === 'poison'));
        assert.equal(done.filter((o) => o.ok).length, 1000 - refused.length);
        await assertToldMatchesDatabase(done.filter((o) => o.amount === 10));
      } finally {
        await oneLane.close();
      }
    });
  });

  describe('attack: the lane connection killed with transactions in flight', () => {
    test('pg_terminate_backend after the first transaction answered: every caller answered, the database agrees', async () => {
      const oneLane = openStorage(url, { ledgerWriters: 1 });
      const killer = new pg.Client({ connectionString: url });
      await killer.connect();
      try {
        const w = await fundedWallet(s.db, 1_000_000);
        let answered = false;
        // The lane's backend between two statements may show as idle for an instant: try until it is caught.
        const first = afterBatches(1).then(async () => {
          while (!answered) {
            const killed = await killer.query(
              `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND backend_type = 'client backend' AND query NOT ILIKE '%pg_stat_activity%' AND state <> 'idle'`,
            );
            if (killed.rowCount) return killed;
          }
          return { rowCount: 0 };
        });
        const outcomes = await reserveAll(oneLane, [w], 2000);
        answered = true;
        // An error while a COMMIT was on the wire: the caller must not rely on it either way.
        await assertToldMatchesDatabase(outcomes, () => true);
        const ok = outcomes.filter((o) => o.ok).length;
        assert.equal((await first).rowCount, 1, 'the lane backend was terminated mid-backlog');
        // The lane takes a fresh connection afterwards.
        assert.equal(await reserve(oneLane, { wallet: w, apiKeyId: 1, requestId: id(), amountUsdc: 1, leaseMs: 60_000 }), true, `${ok} of 2000 resolved`);
      } finally {
        await killer.end();
        await oneLane.close().catch(() => undefined);
      }
    });

    for (const moment of ['before the 2nd transaction is written', 'after the 2nd COMMIT is written, before its answer'] as const) {
      test(`socket destroyed ${moment}: no resolved unit missing, no known-failed unit present, the lane recovers`, async () => {
        const lane = ownLane();
        try {
          const w = await fundedWallet(s.db, 1_000_000);
          let begins = 0;
          let commits = 0;
          let armed = true;
          /** Transactions whose BEGIN was written before the cut: each may have committed. */
          let writtenBeforeCut = 0;
          const pending = reserveAll(lane.storage, [w], 400);
          // The lane connects on its first batch: wrap the socket's writes as soon as it exists.
          while (lane.clients.length === 0) await new Promise((r) => setImmediate(r));
          const socket = socketOf(lane.clients[0]!);
          const write = socket.write.bind(socket);
          socket.write = (chunk: Buffer, ...rest: unknown[]) => {
            const text = Buffer.isBuffer(chunk) ? chunk.toString('latin1') : String(chunk);
            if (armed && moment.startsWith('before') && text.includes('BEGIN\0') && ++begins === 2) {
              armed = false;
              writtenBeforeCut = 1;
              socket.destroy();
              return false;
            }
            if (armed && text.includes('BEGIN\0')) writtenBeforeCut++;
            const written = write(chunk, ...rest);
            if (armed && moment.startsWith('after') && text.includes('COMMIT\0') && ++commits === 2) {
              // From inside a promise job a tick runs after the microtasks: the next transaction may still go out first.
              process.nextTick(() => {
                armed = false;
                socket.destroy();
              });
            }
            return written;
          };
          const outcomes = await pending;
          assert.equal(armed, false, 'the connection was cut');
          const rejected = outcomes.filter((o) => !o.ok);
          assert.ok(rejected.length > 0, 'the cut reached callers');
          // A transaction written before the cut has an unknown outcome (its COMMIT may have landed); the ones
          // whose BEGIN never left must be absent. One wallet: the transactions take the units in submission order.
          const onTheWire = new Set(outcomes.slice(0, writtenBeforeCut * 64).map((o) => o.requestId));
          await assertToldMatchesDatabase(outcomes, (o) => onTheWire.has(o.requestId));
          assert.equal(await reserve(lane.storage, { wallet: w, apiKeyId: 1, requestId: id(), amountUsdc: 1, leaseMs: 60_000 }), true);
        } finally {
          await lane.pool.end().catch(() => undefined);
        }
      });
    }
  });

  describe('attack: the connection cut while a rolled-back batch reruns its units alone behind later batches', () => {
    test('poisoned units in a backlog, the socket destroyed right after the first ROLLBACK: no poison committed, no resolved unit missing', async () => {
      const lane = ownLane();
      try {
        const w = await fundedWallet(s.db, 1_000_000);
        let armed = true;
        const pending = Promise.all(
          Array.from({ length: 400 }, (_, i) => (i % 90 === 30 ? poisoned(lane.storage, w) : reserveAll(lane.storage, [w], 1).then(([o]) => o as Outcome))),
        );
        while (lane.clients.length === 0) await new Promise((r) => setImmediate(r));
        const socket = socketOf(lane.clients[0]!);
        const write = socket.write.bind(socket);
        socket.write = (chunk: Buffer, ...rest: unknown[]) => {
          const written = write(chunk, ...rest);
          if (armed && (Buffer.isBuffer(chunk) ? chunk.toString('latin1') : String(chunk)).includes('ROLLBACK\0')) {
            armed = false;
            process.nextTick(() => socket.destroy());
          }
          return written;
        };
        const outcomes = await pending;
        assert.equal(armed, false, 'the connection was cut after a rollback');
        assert.ok(outcomes.filter((o) => o.amount === 7).every((o) => !o.ok));
        // Cut with COMMITs on the wire: those callers may not rely on their error either way. The poison's +7 never
        // committed: locked funds equal the reservations exactly (checked below).
        await assertToldMatchesDatabase(
          outcomes.filter((o) => o.amount === 10),
          (o) => o.err instanceof CommitOutcomeUnknown,
        );
        assert.equal(await reserve(lane.storage, { wallet: w, apiKeyId: 1, requestId: id(), amountUsdc: 1, leaseMs: 60_000 }), true);
      } finally {
        await lane.pool.end().catch(() => undefined);
      }
    });
  });

  describe('attack: a writer outside the batches in a lock cycle with one of several transactions in flight', () => {
    test('deadlock with an outside session holding the higher wallet: no caller sees it, each unit commits once', async () => {
      const oneLane = openStorage(url, { ledgerWriters: 1 });
      const outside = new pg.Client({ connectionString: url });
      await outside.connect();
      try {
        const [a, b] = [await fundedWallet(s.db, 100_000), await fundedWallet(s.db, 100_000)].sort();
        await outside.query('BEGIN');
        await outside.query('UPDATE wallets SET balance_usdc = balance_usdc WHERE address = $1', [b]);
        const pending = reserveAll(oneLane, [a!, b!], 600);
        // Let the first batch lock a and wait for b, then close the cycle from outside.
        await new Promise((r) => setTimeout(r, 150));
        const cycle = outside.query('UPDATE wallets SET balance_usdc = balance_usdc WHERE address = $1', [a]).then(
          () => 'outside won',
          (e: { code?: string }) => e.code,
        );
        const outsideResult = await cycle;
        await outside.query(outsideResult === 'outside won' ? 'COMMIT' : 'ROLLBACK');
        const outcomes = await pending;
        assert.deepEqual(
          outcomes.filter((o) => !o.ok).map((o) => o.err?.message),
          [],
          `outside: ${outsideResult}`,
        );
        await assertToldMatchesDatabase(outcomes);
      } finally {
        await outside.end();
        await oneLane.close();
      }
    });
  });

  describe('attack: statement_timeout in one of several transactions in flight', () => {
    test('a wallet locked from outside past statement_timeout: its units fail with the timeout or commit, the others commit once', async () => {
      // Connections opened from now on time statements out at 150 ms: the lane's, opened below.
      const database = new URL(url).pathname.slice(1);
      await sql.raw(`ALTER DATABASE "${database}" SET statement_timeout = 150`).execute(s.db);
      const timed = openStorage(url, { ledgerWriters: 1 });
      const outside = new pg.Client({ connectionString: url });
      await outside.connect();
      try {
        const wallets = [await fundedWallet(s.db, 100_000), await fundedWallet(s.db, 100_000), await fundedWallet(s.db, 100_000)];
        await outside.query('BEGIN');
        await outside.query('UPDATE wallets SET balance_usdc = balance_usdc WHERE address = $1', [wallets[1]]);
        const pending = reserveAll(timed, wallets, 300);
        // Held past the first timeouts of all four transactions in flight and into their reruns alone.
        setTimeout(() => void outside.query('COMMIT'), 1500);
        const outcomes = await pending;
        const failures = outcomes.filter((o) => !o.ok);
        assert.ok(
          failures.length > 0 && failures.every((o) => o.wallet === wallets[1] && o.err?.code === '57014'),
          `only the locked wallet's units fail, with 57014: ${failures.map((o) => `${o.wallet === wallets[1]}:${o.err?.code}`).join(',')}`,
        );
        await assertToldMatchesDatabase(outcomes);
      } finally {
        await outside.end().catch(() => undefined);
        await timed.close();
        await sql.raw(`ALTER DATABASE "${database}" RESET statement_timeout`).execute(s.db);
      }
    });
  });

  describe('attack: the pool closing (shutdown) with transactions in flight', () => {
    test('close after the first transaction answered: every caller answered, each told outcome true in the database', async () => {
      const closing = openStorage(url, { ledgerWriters: 1 });
      const w = await fundedWallet(s.db, 1_000_000);
      let closed: Promise<void> = Promise.resolve();
      void afterBatches(1).then(() => (closed = closing.close()));
      const outcomes = await Promise.race([
        reserveAll(closing, [w], 1500),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('a caller was never answered')), 20_000)),
      ]);
      await closed;
      await assertToldMatchesDatabase(outcomes);
    });
  });

  describe('attack: thousands of limit-checked reserves over several wallets and lanes', () => {
    test('exactly K of N admitted per wallet under a key limit or a tight balance, the rest refused, nothing else', async () => {
      const lanes = openStorage(url, { ledgerWriters: 4 });
      try {
        const setups = [] as { wallet: string; key: number; expected: number }[];
        for (let i = 0; i < 8; i++) {
          // Even wallets: the key's limit binds (500 → 50 of 10); odd: the balance binds (310 → 31).
          const wallet = await fundedWallet(s.db, i % 2 ? 310 : 10_000);
          const key = await insertKey(s.db, wallet, generateKey(randomBytes(32)), 'limited');
          await s.db.updateTable('api_keys').set({ spend_limit_usdc: 500, spend_limit_period: 'total' }).where('id', '=', key.id).execute();
          setups.push({ wallet, key: key.id, expected: i % 2 ? 31 : 50 });
        }
        const outcomes = await Promise.all(
          Array.from({ length: 3200 }, (_, i) => {
            const { wallet, key } = setups[i % 8]!;
            const requestId = id();
            return tryReserve(lanes, { wallet, apiKeyId: key, requestId, amountUsdc: 10, leaseMs: 60_000, keyHasLimit: i % 3 !== 0 }).then(
              (o) => ({ requestId, wallet, amount: 10, ok: o.ok }),
              (err: Error) => ({ requestId, wallet, amount: 10, ok: false, err }),
            );
          }),
        );
        assert.deepEqual(
          outcomes.filter((o) => 'err' in o).map((o) => String((o as Outcome).err)),
          [],
        );
        assert.deepEqual(
          setups.map((x) => outcomes.filter((o) => o.wallet === x.wallet && o.ok).length),
          setups.map((x) => x.expected),
        );
        await assertToldMatchesDatabase(outcomes);
      } finally {
        await lanes.close();
      }
    });
  });

  describe('attack: the lane connection lost with up to COMMITS_IN_FLIGHT transactions on the wire', () => {
    /** Destroys the lane's socket right after its `nth` COMMIT is written: the transactions before and behind it are in flight. */
    async function cutAfterCommit(lane: ReturnType<typeof ownLane>, nth: number): Promise<() => boolean> {
      while (lane.clients.length === 0) await new Promise((r) => setImmediate(r));
      const socket = socketOf(lane.clients[0]!);
      const write = socket.write.bind(socket);
      let commits = 0;
      let cut = false;
      socket.write = (chunk: Buffer, ...rest: unknown[]) => {
        const written = write(chunk, ...rest);
        if (!cut && (Buffer.isBuffer(chunk) ? chunk.toString('latin1') : String(chunk)).includes('COMMIT\0') && ++commits === nth) {
          cut = true;
          process.nextTick(() => socket.destroy());
        }
        return written;
      };
      return () => cut;
    }

    /** Each error a caller of the lane heard: an unknown outcome or a clearly not-committed one, and an outage either way. */
    function assertToldUnknownOrNotCommitted(errors: unknown[]) {
      assert.ok(errors.length > 0, 'the cut reached callers');
      const kinds = errors.map((e) => (e instanceof CommitOutcomeUnknown ? 'unknown' : e instanceof NotCommitted ? 'not committed' : String(e)));
      assert.deepEqual(
        kinds.filter((k) => k !== 'unknown' && k !== 'not committed'),
        [],
      );
      assert.ok(kinds.includes('unknown'), 'the transactions on the wire are unknown');
      // The settler retries and spools what isDatabaseOutage says; the HTTP layer answers 503 for the database (a
      // failed reserve: the provider is never called).
      assert.ok(
        errors.every((e) => isDatabaseOutage(e) && unavailableDependency(e) === 'database'),
        'an outage to the HTTP layer (503, no provider call) and to the settler (retry, spool)',
      );
    }

    test('reserves: each caller hears an unknown or a not-committed outcome; once the leases run out the sweeper frees every lock', async () => {
      const lane = ownLane();
      try {
        const w = await fundedWallet(s.db, 1_000_000);
        const pending = reserveAll(lane.storage, [w], 400, 10, 1_000);
        const cut = await cutAfterCommit(lane, 2);
        const outcomes = await pending;
        assert.ok(cut(), 'the connection was cut');
        const rejected = outcomes.filter((o) => !o.ok);
        assertToldUnknownOrNotCommitted(rejected.map((o) => o.err));
        await assertToldMatchesDatabase(outcomes, (o) => o.err instanceof CommitOutcomeUnknown);
        // Whatever committed unseen is locked until its lease runs out; then the sweeper voids it, and nothing moved.
        // The sweeper takes 500 a pass, of every wallet in this database.
        while ((await sweepExpiredReservations(s.db, Date.now() + 5_000)) > 0);
        assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1_000_000, locked_usdc: 0, available_usdc: 1_000_000 });
        await assertLedgerConsistent(s.db);
      } finally {
        await lane.pool.end().catch(() => undefined);
      }
    });

    test('settles through the durable settler: the unknown ones are retried and spooled, each request charged exactly once', async () => {
      const lane = ownLane();
      const errors: unknown[] = [];
      const storage: Storage = {
        ...lane.storage,
        writeUnit: (unit, opts) =>
          lane.storage.writeUnit(unit, opts).catch((err: unknown) => {
            errors.push(err);
            throw err;
          }),
      };
      try {
        const w = await fundedWallet(s.db, 1_000_000);
        const reserved = await reserveAll(lane.storage, [w], 300);
        assert.ok(reserved.every((o) => o.ok));
        const settler = createDurableSettler({
          storage,
          spool: SettleSpool.open(tempDir(), 'pglane'),
          logger: pino({ level: 'silent' }),
          failure: () => null,
          onApplied: () => undefined,
          onUnbilled: () => undefined,
        });
        const settles = Promise.all(
          reserved.map((o) =>
            settler.settle({ requestId: o.requestId, wallet: w, chargeUsdc: 7, usage: usageRecord(o.requestId, w) }, { lateIfReleased: true }),
          ),
        );
        const cut = await cutAfterCommit(lane, 2);
        const outcomes = await settles;
        assert.ok(cut(), 'the connection was cut');
        assertToldUnknownOrNotCommitted(errors);
        assert.deepEqual(
          outcomes.filter((o) => !o.applied || o.chargedUsdc !== 7),
          [],
        );
        await settler.replay();
        const usage = await s.db.selectFrom('request_usage').select(sql<number>`count(*)`.as('n')).where('wallet', '=', w).executeTakeFirstOrThrow();
        assert.equal(Number(usage.n), 300, 'one usage row a request');
        assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1_000_000 - 300 * 7, locked_usdc: 0, available_usdc: 1_000_000 - 300 * 7 });
        await assertLedgerConsistent(s.db);
      } finally {
        await lane.pool.end().catch(() => undefined);
      }
    });
  });

  describe('attack: BATCH_DEADLINE firing with batches behind it', () => {
    test('a wallet row held 11 s from outside under a backlog of 400: the stalled transactions fail, the rest commit, the lane recovers', async () => {
      const oneLane = openStorage(url, { ledgerWriters: 1 });
      const outside = new pg.Client({ connectionString: url });
      await outside.connect();
      try {
        const w = await fundedWallet(s.db, 1_000_000);
        await outside.query('BEGIN');
        await outside.query('UPDATE wallets SET balance_usdc = balance_usdc WHERE address = $1', [w]);
        const pending = reserveAll(oneLane, [w], 400);
        setTimeout(() => void outside.query('COMMIT'), 11_000);
        const outcomes = await pending;
        const failed = outcomes.filter((o) => !o.ok);
        assert.ok(failed.length > 0 && failed.every((o) => o.err?.code === 'ETIMEDOUT'), `${failed.length} failed: ${failed[0]?.err?.message}`);
        // The stalled transactions never got the row lock: none of them committed.
        await assertToldMatchesDatabase(outcomes, () => false);
        assert.equal(await reserve(oneLane, { wallet: w, apiKeyId: 1, requestId: id(), amountUsdc: 1, leaseMs: 60_000 }), true);
      } finally {
        await outside.end().catch(() => undefined);
        await oneLane.close();
      }
    });
  });
});
