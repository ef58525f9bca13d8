import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import { generateKey, insertKey } from '../../src/keys/api-keys.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

const src = (path: string) => JSON.stringify(new URL(`../../src/${path}`, import.meta.url).href);

/**
 * SQLite's group commit writes a batch's counters (src/storage/batch-counters.ts) just before its
 * COMMIT, after every unit's other statements. A process killed between the two must leave nothing
 * of the batch: not the usage rows and balances without their totals, nor the other way round.
 */
describe('attack: a process killed while its batch has counters waiting (sqlite)', () => {
  test('SIGKILL after two finishes ran in the batch, before its counters and COMMIT: nothing of either finish is written, and both finish once later', async () => {
    const url = await freshDatabaseUrl('sqlite');
    const s = openStorage(url);
    await migrateToLatest(s);
    const wallet = await fundedWallet(s.db, 10_000);
    const apiKeyId = (await insertKey(s.db, wallet, generateKey(randomBytes(32)), 'crash')).id;
    for (const id of ['a', 'b']) assert.ok((await tryReserve(s, { wallet, apiKeyId, requestId: `${wallet}-${id}`, amountUsdc: 100, leaseMs: 60_000 })).ok);
    await s.close();

    const usage = (id: string) => JSON.stringify({ ...usageRecord(`${wallet}-${id}`, wallet), apiKeyId });
    // One turn of the event loop: the two finishes and the unit that kills the process share a batch.
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `import { openStorage } from ${src('storage/database.ts')};
         import { finishReservation } from ${src('ledger/operations/finish.ts')};
         const s = openStorage(${JSON.stringify(url)});
         void finishReservation(s, '${wallet}-a', 30, ${usage('a')});
         void finishReservation(s, '${wallet}-b', 40, ${usage('b')});
         void s.writeUnit(async () => { process.kill(process.pid, 'SIGKILL'); await new Promise(() => {}); });`,
      ],
      { stdio: 'inherit' },
    );
    const [code, signal] = await once(child, 'exit');
    assert.deepEqual([code, signal], [null, 'SIGKILL']);

    const after = openStorage(url);
    try {
      const pending = await after.db.selectFrom('reservations').select('status').where('wallet', '=', wallet).execute();
      assert.deepEqual(
        pending.map((r) => r.status),
        ['pending', 'pending'],
      );
      assert.equal((await after.db.selectFrom('request_usage').select('request_id').where('wallet', '=', wallet).execute()).length, 0);
      assert.equal(await after.db.selectFrom('usage_totals').select('request_count').where('api_key_id', '=', apiKeyId).executeTakeFirst(), undefined);
      await assertLedgerConsistent(after.db);
      const [a, b] = await Promise.all([
        finishReservation(after, `${wallet}-a`, 30, { ...usageRecord(`${wallet}-a`, wallet), apiKeyId }),
        finishReservation(after, `${wallet}-b`, 40, { ...usageRecord(`${wallet}-b`, wallet), apiKeyId }),
      ]);
      assert.deepEqual([a.chargedUsdc, b.chargedUsdc, b.balanceUsdc], [30, 40, 10_000 - 70]);
      const totals = await after.db
        .selectFrom('usage_totals')
        .select(['request_count', 'charged_usdc'])
        .where('api_key_id', '=', apiKeyId)
        .executeTakeFirstOrThrow();
      assert.deepEqual([Number(totals.request_count), Number(totals.charged_usdc)], [2, 70]);
      await assertLedgerConsistent(after.db);
    } finally {
      await after.close();
    }
  });
});
