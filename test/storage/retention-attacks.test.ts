import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, test } from 'node:test';
import { applyMovement } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve, tryReserve } from '../../src/ledger/operations/reserve.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { fixCharge, holdMaximum } from '../../src/payments/upto/upto-store.ts';
import { runRetentionPass } from '../../src/retention/retention-job.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl, tempDir } from '../support/engines.ts';
import { fundedWallet, newWallet, usageRecord } from '../support/ledger.ts';
import { DAY, retentionConfig, seedRequests } from '../support/retention.ts';
import { PAYLOAD, pendingUpto, spend } from '../support/upto-hold-fixtures.ts';

const HOUR = 3_600_000;

/** Retention passes until one removes nothing; the rows each kind lost in all. */
async function drain(s: Storage, config: ReturnType<typeof retentionConfig>, now: number) {
  const total = { reservations: 0, usage: 0 };
  for (;;) {
    const o = await runRetentionPass(s, config, { now, holder: 'a' });
    total.reservations += o.reservations;
    total.usage += o.usage;
    if (o.reservations === 0 && o.usage === 0) return total;
  }
}

const credit = (s: Storage, wallet: string, amountUsdc: number, at: number) =>
  s.db.transaction().execute((trx) => applyMovement(trx, { wallet, kind: 'adjustment', amountUsdc }, at));

for (const engine of ENGINES) {
  describe(`attack: retention and ledger-check checkpoints (${engine})`, () => {
    const opened: Storage[] = [];
    const fresh = async (): Promise<{ s: Storage; url: string }> => {
      const url = await freshDatabaseUrl(engine);
      const s = openStorage(url);
      opened.push(s);
      await migrateToLatest(s);
      return { s, url };
    };
    after(async () => {
      for (const s of opened) await s.close();
    });

    test('a late charge arriving after its swept reservation passed the reservation window still bills the answer', async () => {
      const { s } = await fresh();
      const wallet = await fundedWallet(s.db, 10_000);
      const t0 = Date.now();
      // An ordinary request, finished: what the reservation window is for.
      const done = randomUUID();
      assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId: done, amountUsdc: 500, leaseMs: 600_000 }, t0), true);
      await finishReservation(s, done, 200, usageRecord(done, wallet), t0);
      // The answer of this one was delivered, its settle spooled (an outage, then the instance down
      // for days); its lease ran out and the sweeper released it. The spool is replayed much later.
      const swept = randomUUID();
      assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId: swept, amountUsdc: 500, leaseMs: 1 }, t0), true);
      assert.equal(await sweepExpiredReservations(s.db, t0 + 60_000), 1);
      const later = t0 + 10 * DAY;
      assert.ok((await runLedgerCheck(s.db, { full: false, now: later })).stored);
      const removed = await drain(s, retentionConfig(join(tempDir(), 'archive'), { reservationDays: 1, usageDays: 30 }), later);
      assert.equal(removed.reservations, 1, 'the finished request left');

      const replay = await applySettle(s, { requestId: swept, wallet, chargeUsdc: 300, usage: usageRecord(swept, wallet) }, later);
      assert.equal(replay.kind, 'late', 'the delivered answer is charged, not forgotten as unknown');
      assert.deepEqual((await checkLedger(s.db)).problems, []);
    });

    test("an upto payment's finished requests retired: the full check still ties what left the hold to its requests' charges", async () => {
      const { s } = await fresh();
      const { id, payer } = await pendingUpto(s);
      assert.equal((await holdMaximum(s.db, id, PAYLOAD)).kind, 'held');
      await spend(s, payer, 300);
      assert.equal(await fixCharge(s.db, id), 'fixed');
      await s.db.updateTable('payments').set({ state: 'settled', upto_state: 'settled', onchain_amount_atomic: '300' }).where('id', '=', id).execute();
      assert.deepEqual((await checkLedger(s.db)).problems, []);
      const later = Date.now() + 10 * DAY;
      assert.ok((await runLedgerCheck(s.db, { full: false, now: later })).stored);
      await drain(s, retentionConfig(join(tempDir(), 'archive')), later);
      assert.deepEqual((await runLedgerCheck(s.db, { full: true })).problems, []);
      assert.deepEqual((await runLedgerCheck(s.db, { full: false, now: later })).problems, []);
    });

    test("a key at its spend limit stays at it once its requests are retired: retirement never resets a key's spend", async () => {
      const { s } = await fresh();
      const wallet = await fundedWallet(s.db, 100_000);
      const now = Date.now();
      const key = await s.db
        .insertInto('api_keys')
        .values({
          wallet,
          key_hash: randomUUID(),
          prefix: 'tg',
          last4: 'abcd',
          label: 'l',
          created_at: now,
          spend_limit_usdc: 1_000,
          spend_limit_period: 'total',
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const apiKeyId = Number(key.id);
      for (let i = 0; i < 2; i++) {
        const requestId = randomUUID();
        assert.equal(await reserve(s, { wallet, apiKeyId, requestId, amountUsdc: 500, leaseMs: 600_000 }, now), true);
        await finishReservation(s, requestId, 500, { ...usageRecord(requestId, wallet), apiKeyId }, now);
      }
      const refused = async (at: number) =>
        (await tryReserve(s, { wallet, apiKeyId, requestId: randomUUID(), amountUsdc: 1, leaseMs: 600_000 }, at)).ok === false;
      assert.ok(await refused(now), 'at its limit');
      const later = now + 10 * DAY;
      await runLedgerCheck(s.db, { full: false, now: later });
      const removed = await drain(s, retentionConfig(join(tempDir(), 'archive')), later);
      assert.deepEqual(removed, { reservations: 2, usage: 2 });
      assert.ok(await refused(later), 'still at its limit after its rows left');
      assert.deepEqual((await runLedgerCheck(s.db, { full: true })).problems, []);
    });

    test('two ledger-checks at once, one a day later than the other, never count the same entries twice in the checkpoint', async () => {
      const { s, url } = await fresh();
      const other = engine === 'postgres' ? openStorage(url) : s;
      if (other !== s) opened.push(other);
      const wallet = newWallet();
      const base = Math.floor(Date.now() / DAY) - 10;
      await credit(s, wallet, 1_000, base * DAY + HOUR);
      assert.equal((await runLedgerCheck(s.db, { full: false, now: (base + 1) * DAY + HOUR })).stored?.at, (base + 1) * DAY + HOUR);
      await credit(s, wallet, 20, (base + 1) * DAY + HOUR);
      await credit(s, wallet, 300, (base + 2) * DAY + HOUR);
      // One operator's cron and another's hand, or two instances' clocks either side of a day's close.
      const [a, b] = await Promise.allSettled([
        runLedgerCheck(s.db, { full: false, now: (base + 2) * DAY + HOUR }),
        runLedgerCheck(other.db, { full: false, now: (base + 3) * DAY + HOUR }),
      ]);
      const stored = [a, b].filter((r) => r.status === 'fulfilled' && r.value.stored).length;
      assert.ok(stored >= 1, 'one of them stored its checkpoint');
      const next = await runLedgerCheck(s.db, { full: false, now: (base + 3) * DAY + HOUR });
      assert.deepEqual(next.problems, [], 'the checkpoint holds each entry once');
      assert.equal(next.entries, (await checkLedger(s.db)).entries);
    });

    test('a row still uncommitted when a boundary is read (PostgreSQL hands its id out before the commit) is waited for, then covered once', {
      skip: engine === 'sqlite' && 'SQLite hands an id out under its one write lock: no row commits below one already committed',
    }, async () => {
      const { s, url } = await fresh();
      const [w1, w2] = [newWallet(), newWallet()];
      const at = Date.now() - HOUR;
      await credit(s, w1, 1_000, at);
      await credit(s, w2, 1_000, at);
      assert.ok((await runLedgerCheck(s.db, { full: false, now: at + 1 })).stored);
      const { default: pg } = await import('pg');
      const inFlight = new pg.Client({ connectionString: url });
      await inFlight.connect();
      try {
        // Its first write is the insert: it draws its id before it has a transaction id of its own.
        await inFlight.query('BEGIN');
        const held = await inFlight.query("INSERT INTO ledger_entries (wallet, kind, amount_usdc, created_at) VALUES ($1, 'adjustment', 5, $2) RETURNING id", [
          w1,
          at + 2,
        ]);
        await inFlight.query('UPDATE wallets SET balance_usdc = balance_usdc + 5 WHERE address = $1', [w1]);
        await credit(s, w2, 7, at + 3);
        let done = false;
        const check = runLedgerCheck(s.db, { full: false, now: at + 4 }).finally(() => (done = true));
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(done, false, 'the boundary waits for the transaction in flight');
        await inFlight.query('COMMIT');
        const stored = (await check).stored;
        assert.ok(stored && stored.last_entry_id >= Number(held.rows[0].id), 'the row is below the boundary');
        const next = await runLedgerCheck(s.db, { full: false, now: at + 5 });
        assert.deepEqual(next.problems, [], 'the checkpoint counted the row that committed during its wait');
        assert.equal(next.entries, (await checkLedger(s.db)).entries);
      } finally {
        await inFlight.end();
      }
    });

    test('an export that cannot be written deletes nothing', async () => {
      const { s } = await fresh();
      await seedRequests(s, 30, 1, 'x');
      const later = Date.now() + 10 * DAY;
      await runLedgerCheck(s.db, { full: false, now: later });
      const notAFolder = join(tempDir(), 'taken');
      writeFileSync(notAFolder, 'a file where the folder should be');
      const config = retentionConfig(notAFolder);
      await assert.rejects(runRetentionPass(s, config, { now: later, holder: 'a' }));
      const left = await s.db
        .selectFrom('request_usage')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow();
      assert.equal(Number(left.n), 30);
      assert.deepEqual((await checkLedger(s.db)).problems, []);
    });
  });
}

/**
 * `rows` requests finished `ageDays` ago, written straight into a SQLite file (a reservation and a
 * usage row each, 100 wallets), and a checkpoint covering them: a large table, built in seconds.
 */
async function largeSqliteTables(file: string, rows: number, ageDays: number): Promise<void> {
  const { default: Sqlite } = await import('better-sqlite3');
  const raw = new Sqlite(file);
  const start = Date.now() - ageDays * DAY;
  const wallet = raw.prepare('INSERT INTO wallets (address, balance_usdc, locked_usdc, created_at, updated_at) VALUES (?, 0, 0, 0, 0)');
  const reservation = raw.prepare(
    "INSERT INTO reservations (wallet, api_key_id, request_id, amount_usdc, status, charged_usdc, lease_expires_at, created_at, finished_at) VALUES (?, 1, ?, 500, 'settled', 100, 0, ?, ?)",
  );
  const usage = raw.prepare(
    "INSERT INTO request_usage (request_id, api_key_id, wallet, model, provider, charged_usdc, status, latency_ms, created_at) VALUES (?, 1, ?, 'm', 'p', 100, 'ok', 1, ?)",
  );
  raw.exec('BEGIN');
  for (let w = 0; w < 100; w++) wallet.run([`0xlarge${w}`]);
  for (let i = 0; i < rows; i++) {
    const at = start + i;
    reservation.run([`0xlarge${i % 100}`, `large-${i}`, at, at]);
    usage.run([`large-${i}`, `0xlarge${i % 100}`, at]);
  }
  raw
    .prepare(
      'INSERT INTO ledger_checkpoints (at, cells_from, last_entry_id, last_usage_id, last_reservation_id, entries, credits_usdc, charges_usdc, created_at) VALUES (?, ?, 0, ?, ?, 0, 0, 0, ?)',
    )
    .run([Date.now(), Math.floor(Date.now() / DAY), rows, rows, Date.now()]);
  raw.exec('COMMIT');
  raw.close();
}

/**
 * The longest any one SQLite statement ran while `work` did: the driver steps a statement on the
 * calling thread, so that is how long the event loop and the connection the group commit waits
 * for were both held.
 */
async function longestStatement(work: () => Promise<unknown>): Promise<number> {
  const { default: Sqlite } = await import('better-sqlite3');
  const probe = new Sqlite(':memory:');
  const statement = Object.getPrototypeOf(probe.prepare('select 1')) as Record<string, (...a: unknown[]) => unknown>;
  probe.close();
  const originals = Object.fromEntries(['all', 'get', 'run', 'iterate'].map((m) => [m, statement[m]!]));
  let longest = 0;
  for (const [m, original] of Object.entries(originals)) {
    statement[m] = function (this: unknown, ...a: unknown[]) {
      const started = performance.now();
      try {
        return original.apply(this, a);
      } finally {
        longest = Math.max(longest, performance.now() - started);
      }
    };
  }
  try {
    await work();
  } finally {
    Object.assign(statement, originals);
  }
  return longest;
}

describe('attack: retention on a large SQLite table', () => {
  test('a pass when no row has reached its window yet reads none of them: no statement holds the connection 50 ms', async () => {
    const url = await freshDatabaseUrl('sqlite');
    const s = openStorage(url);
    try {
      await migrateToLatest(s);
      // 400,000 requests of the last two days, inside both windows: nothing may leave, and nothing needs reading.
      await largeSqliteTables(url.slice('sqlite:'.length), 400_000, 2);
      const config = retentionConfig(join(tempDir(), 'archive'), { reservationDays: 3, usageDays: 9 });
      // Measured from the first pass: database.ts binds each statement's methods when it first prepares it.
      const held = await longestStatement(async () =>
        assert.deepEqual(await runRetentionPass(s, config, { now: Date.now(), holder: 'a' }), { ran: true, reservations: 0, usage: 0 }),
      );
      assert.ok(held < 50, `one statement held SQLite for ${held.toFixed(1)} ms`);
    } finally {
      await s.close();
    }
  });
});

describe('attack: the usage export', () => {
  test('an export cut short (the disk full) fails and leaves no partial file behind to fill the disk pass after pass', () => {
    const dir = join(tempDir(), 'archive');
    const exporter = pathToFileURL(resolve('src/ledger/retention/usage-export.ts')).href;
    // Incompressible rows, far more than the 64 KiB the child may write (RLIMIT_FSIZE: its writes fail with EFBIG).
    const script = `import { randomBytes } from 'node:crypto';
      import { exportUsageRows } from '${exporter}';
      const rows = Array.from({ length: 200 }, (_, i) => ({ id: i + 1, junk: randomBytes(1024).toString('hex') }));
      exportUsageRows(process.argv[1], rows).then(() => process.exit(0), (err) => { console.error(err.code); process.exit(3); });`;
    const run = spawnSync('bash', ['-c', 'ulimit -f 64; exec "$0" --import tsx --input-type=module -e "$1" "$2"', process.execPath, script, dir], {
      encoding: 'utf8',
    });
    assert.equal(run.status, 3, run.stderr);
    assert.match(run.stderr, /EFBIG|ENOSPC/);
    assert.deepEqual(readdirSync(dir), []);
  });
});
