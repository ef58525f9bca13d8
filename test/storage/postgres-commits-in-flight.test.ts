import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { after, before, describe, test } from 'node:test';
import { getBalance } from '../../src/ledger/balances.ts';
import { reserve, tryReserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { COMMITS_IN_FLIGHT, MAX_UNITS_PER_COMMIT } from '../../src/storage/postgres-group-commit.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet } from '../support/ledger.ts';

/**
 * PostgreSQL's lane pipelines its transactions (src/storage/postgres-group-commit.ts): a backlog of
 * one wallet goes out as several transactions of at most MAX_UNITS_PER_COMMIT units, the next one
 * written behind the last one's COMMIT, up to COMMITS_IN_FLIGHT at once. Counted from the group
 * commit's own channel: each transaction's units, and when it started and was answered.
 */
describe('PostgreSQL: a backlog of one wallet in pipelined transactions', () => {
  let url: string;
  let oneLane: Storage;
  before(async () => {
    url = await freshDatabaseUrl('postgres');
    oneLane = openStorage(url, { ledgerWriters: 1 });
    await migrateToLatest(oneLane);
  });
  after(() => oneLane.close());

  let n = 0;
  const id = () => `inflight-${++n}-${randomBytes(4).toString('hex')}`;
  const reserveOf = (wallet: string, amountUsdc: number) => reserve(oneLane, { wallet, apiKeyId: 1, requestId: id(), amountUsdc, leaseMs: 60_000 });

  /** The batches the group commit ran while `work` did. */
  async function batchesOf<T>(work: () => Promise<T>): Promise<{ value: T; batches: Batch[] }> {
    const batches: Batch[] = [];
    const listen = (message: unknown) => batches.push(message as Batch);
    subscribe('tollgate:group-commit', listen);
    try {
      return { value: await work(), batches };
    } finally {
      unsubscribe('tollgate:group-commit', listen);
    }
  }

  test('600 reserves of one wallet sent at once: each commits once, no transaction over the cap, several in flight at once', async () => {
    const w = await fundedWallet(oneLane.db, 10_000);
    const { value: admitted, batches } = await batchesOf(() => Promise.all(Array.from({ length: 600 }, () => reserveOf(w, 10))));
    assert.equal(admitted.filter(Boolean).length, 600);
    assert.equal(
      batches.reduce((sum, b) => sum + b.units, 0),
      600,
      'every unit ran in exactly one transaction',
    );
    assert.ok(
      batches.every((b) => b.units <= MAX_UNITS_PER_COMMIT),
      `no transaction over ${MAX_UNITS_PER_COMMIT} units: ${batches.map((b) => b.units).join(',')}`,
    );
    // A transaction that started before the one before it was answered was pipelined behind it.
    const overlapping = batches.filter((b, i) => i > 0 && b.at < batches[i - 1]!.at + batches[i - 1]!.ranMs).length;
    assert.ok(overlapping > 0, `some transaction went out before the last one was answered (${batches.length} transactions)`);
    assert.ok(COMMITS_IN_FLIGHT > 1);
    assert.deepEqual(await getBalance(oneLane.db, w), { balance_usdc: 10_000, locked_usdc: 6_000, available_usdc: 4_000 });
    await assertLedgerConsistent(oneLane.db);
  });

  describe('attack: a unit that fails while other transactions are pipelined behind it', () => {
    test('poisoned units and limit-checked reserves among 600 one-statement reserves: only the poisoned fail, the rest commit once', async () => {
      const w = await fundedWallet(oneLane.db, 10_000);
      // Runs its statement, then throws: its transaction rolls back and each unit runs again alone,
      // while later transactions may already be on the wire. A rerun's BEGIN must not land inside
      // one of them (a limit-checked reserve keeps its transaction open across round trips).
      const poisoned = () =>
        oneLane
          .writeUnit(
            async (tx) => {
              await tx.run('UPDATE wallets SET locked_usdc = locked_usdc + 1 WHERE address = ?', [w]);
              throw new Error('poison');
            },
            { wallet: w },
          )
          .then(
            () => 'committed',
            (err: Error) => err.message,
          );
      const limited = () =>
        tryReserve(oneLane, { wallet: w, apiKeyId: 1, requestId: id(), amountUsdc: 10, leaseMs: 60_000, keyHasLimit: true }).then((o) => o.ok);
      const out = await Promise.all(Array.from({ length: 600 }, (_, i) => (i % 50 === 7 ? poisoned() : i % 20 === 3 ? limited() : reserveOf(w, 10))));
      assert.deepEqual(
        out.filter((x) => typeof x === 'string'),
        Array(12).fill('poison'),
      );
      assert.equal(out.filter((x) => x === true).length, 588);
      assert.deepEqual(await getBalance(oneLane.db, w), { balance_usdc: 10_000, locked_usdc: 5_880, available_usdc: 4_120 });
      await assertLedgerConsistent(oneLane.db);
    });
  });
});

interface Batch {
  at: number;
  units: number;
  ranMs: number;
}
