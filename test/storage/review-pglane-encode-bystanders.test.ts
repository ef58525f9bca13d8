import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { MAX_UNITS_PER_COMMIT } from '../../src/storage/postgres-group-commit.ts';
import { ledgerWithUnlimitedKey } from '../support/cut-lane-proxy.ts';
import { assertLedgerConsistent, fundedWallet } from '../support/ledger.ts';

/**
 * A unit whose value pg cannot encode breaks the lane's connection on the client's side (the design: its
 * batch fails once with that error). A transaction that then found the connection broken before writing
 * anything would hear that error wrapped as NotCommitted, which neither the HTTP layer nor the settler reads
 * as an outage (a 500, no retry) although its units did nothing wrong. None can: the failing batch pipelines
 * no COMMIT, so nothing forms behind it until it ends, and the next batch waits for a fresh connection (hold).
 */
describe('attack: transactions behind a value pg cannot encode, on a backlog', () => {
  let url: string;
  let s: Storage;
  before(async () => {
    ({ url, s } = await ledgerWithUnlimitedKey());
  });
  after(() => s.close());

  test('only its batch-mates fail with it; no later transaction hears its error as a not-committed outcome', async () => {
    const lane = openStorage(url, { ledgerWriters: 1 });
    try {
      const w = await fundedWallet(s.db, 1_000_000);
      assert.equal(await reserve(lane, { wallet: w, apiKeyId: 1, requestId: `warm-${randomBytes(4).toString('hex')}`, amountUsdc: 1, leaseMs: 60_000 }), true);
      const unencodable = {
        toPostgres: () => {
          throw new Error('cannot encode this value');
        },
      };
      // First in the queue: its batch is the first of the backlog, the others form behind it.
      const poisoned = lane.writeUnit((tx) => tx.run('UPDATE wallets SET updated_at = ? WHERE address = ?', [unencodable, w]), {
        wallet: w,
        oneStatement: true,
      });
      const backlog = Array.from({ length: 600 }, () =>
        reserve(lane, { wallet: w, apiKeyId: 1, requestId: `by-${randomBytes(6).toString('hex')}`, amountUsdc: 1, leaseMs: 60_000 }).then(
          () => null,
          (e: unknown) => e,
        ),
      );
      await assert.rejects(poisoned, /cannot encode this value/);
      const errors = (await Promise.all(backlog)).filter((e) => e !== null);
      // Only its batch-mates fail with it (the design); every later transaction runs on a fresh connection.
      assert.ok(errors.length < MAX_UNITS_PER_COMMIT, `${errors.length} bystanders failed`);
      assert.deepEqual(
        errors.filter((e) => !/cannot encode this value/.test((e as Error).message)).map((e) => `${(e as Error).name}: ${(e as Error).message}`),
        [],
      );
      await assertLedgerConsistent(s.db);
    } finally {
      await lane.close();
    }
  });
});
