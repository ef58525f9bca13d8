import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { tempDir } from '../support/engines.ts';

test('the background checkpointer copies committed pages into the database file while the server keeps writing', async () => {
  const file = join(tempDir(), 'tollgate.db');
  const s = openStorage(`sqlite:${file}`, { backgroundCheckpoints: true });
  try {
    await migrateToLatest(s);
    const w = `0x${'d'.repeat(40)}`;
    await adjustBalance(s.db, { wallet: w, amountUsdc: 1_000_000 });
    const before = statSync(file).size;
    // About 300 pages of WAL: far below the 10,000 at which SQLite's own checkpoint would run, so
    // only the background worker can be what moves them into the main file.
    for (let round = 0; round < 20; round++) {
      await Promise.all(
        Array.from({ length: 50 }, (_, i) => reserve(s, { wallet: w, apiKeyId: 1, requestId: `r${round}-${i}`, amountUsdc: 10, leaseMs: 60_000 })),
      );
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          finishReservation(s, `r${round}-${i}`, 3, {
            requestId: `r${round}-${i}`,
            apiKeyId: 1,
            wallet: w,
            model: 'm',
            provider: 'p',
            promptTokens: 1,
            completionTokens: 1,
            reasoningTokens: 0,
            cachedTokens: 0,
            providerCostUsdc: 1,
            status: 'ok',
            latencyMs: 1,
            estimated: false,
          }),
        ),
      );
    }
    const wal = statSync(`${file}-wal`).size;
    assert.ok(wal > 100 * 4096, `the WAL holds the writes (${wal} bytes)`);
    const deadline = Date.now() + 10_000;
    while (statSync(file).size <= before + 50 * 4096 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(statSync(file).size > before + 50 * 4096, `the database file grew from ${before} to ${statSync(file).size} bytes`);
    assert.deepEqual((await checkLedger(s.db)).problems, []);
  } finally {
    await s.close();
  }
});
