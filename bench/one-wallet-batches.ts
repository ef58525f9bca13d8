import { subscribe } from 'node:diagnostics_channel';
import { fundPayers, type Payer } from './ledger.ts';
import { ledgerStatementStats } from './pg-statement-stats.ts';
import { newRequestId } from '../src/http/request-id.ts';
import { finishReservation } from '../src/ledger/operations/finish.ts';
import { reserve } from '../src/ledger/operations/reserve.ts';
import { openStorage } from '../src/storage/database.ts';
import { migrateToLatest } from '../src/storage/migrate.ts';
import { startPostgres } from '../test/support/postgres.ts';

/**
 * The server's time per unit as a function of how many units of ONE wallet run in one transaction:
 * N reserves sent in one turn to one lane, then their N finishes, pg_stat_statements reset before
 * each size, three times each. Batches are at most the group commit's cap, so sizes above it show
 * several transactions (bench/README.md, "PostgreSQL's one-wallet queue").
 * Usage: node --import tsx bench/one-wallet-batches.ts [1,8,32,64,128,256]
 */
const sizes = (process.argv[2] ?? '1,8,32,64,128,256').split(',').map(Number);
const server = await startPostgres({ shared_preload_libraries: 'pg_stat_statements' });
try {
  const url = await server.database();
  const stats = await ledgerStatementStats(url);
  const storage = openStorage(url, { poolSize: 4, ledgerWriters: 1 });
  await migrateToLatest(storage);
  const [payer] = await fundPayers(storage, 1, 'one-wallet batches');
  const runs: Array<{ units: number; ranMs: number }> = [];
  subscribe('tollgate:group-commit', (m) => runs.push(m as { units: number; ranMs: number }));
  const batches = () =>
    runs
      .splice(0)
      .map((b) => `${b.units} units ${b.ranMs.toFixed(1)} ms`)
      .join(', ');
  for (const n of sizes) {
    for (let rep = 1; rep <= 3; rep++) {
      const ids = Array.from({ length: n }, () => newRequestId());
      await stats.reset();
      runs.length = 0;
      await Promise.all(
        ids.map((requestId) => reserve(storage, { wallet: payer!.wallet, apiKeyId: payer!.key.id, requestId, amountUsdc: 100, leaseMs: 60_000 })),
      );
      const reserves = batches();
      await Promise.all(ids.map((requestId) => finishReservation(storage, requestId, 40, usage(requestId, payer!))));
      process.stdout.write(`${n} units, round ${rep}: reserves in ${reserves}; finishes in ${batches()}\n`);
      for (const line of await stats.read()) process.stdout.write(`  ${line}\n`);
    }
  }
  await stats.close();
  await storage.close();
} finally {
  await server.stop();
}

function usage(requestId: string, { wallet, key }: Payer) {
  return {
    requestId,
    apiKeyId: key.id,
    wallet,
    model: 'bench',
    provider: 'bench',
    promptTokens: 10,
    completionTokens: 20,
    reasoningTokens: 0,
    cachedTokens: 0,
    providerCostUsdc: 30,
    status: 'success' as const,
    latencyMs: 1,
    estimated: false,
  };
}
