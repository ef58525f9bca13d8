/*
 * Storage per request and ledger-check time, on SQLite, through the ledger's own operations (no
 * HTTP): `node --import tsx bench/storage-retention.ts [old requests] [new requests]`.
 * - bytes stored per request: the file's used pages (page_count − freelist_count) × page_size over
 *   the requests driven, before retention and after it (then VACUUM), per table from dbstat;
 * - ledger-check: the full check, and the incremental one from a checkpoint after `new requests`
 *   more, scaled to a million ledger entries.
 * Not yet a line of `npm run bench` (no MET/MISSED row): see bench/README.md.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { newRequestId } from '../src/http/request-id.ts';
import { generateKey, insertKey } from '../src/keys/api-keys.ts';
import { adjustBalance } from '../src/ledger/movements.ts';
import { finishReservation } from '../src/ledger/operations/finish.ts';
import { reserve } from '../src/ledger/operations/reserve.ts';
import { runLedgerCheck } from '../src/ledger/checkpoints/run-check.ts';
import { runRetentionPass } from '../src/retention/retention-job.ts';
import { openStorage, type Storage } from '../src/storage/database.ts';
import { migrateToLatest } from '../src/storage/migrate.ts';

const DAY = 86_400_000;
const [oldRequests = 20_000, newRequests = 2_000] = process.argv.slice(2).map(Number);

async function drive(s: Storage, payers: { wallet: string; key: { id: number } }[], n: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const { wallet, key } = payers[next++ % payers.length]!;
      const requestId = newRequestId();
      if (!(await reserve(s, { wallet, apiKeyId: key.id, requestId, amountUsdc: 100, leaseMs: 60_000 }))) throw new Error('wallet ran dry');
      await finishReservation(s, requestId, 40, {
        requestId,
        apiKeyId: key.id,
        wallet,
        model: 'openai/gpt-4o-mini',
        provider: 'openai',
        promptTokens: 10,
        completionTokens: 20,
        reasoningTokens: 0,
        cachedTokens: 0,
        providerCostUsdc: 30,
        status: 'success',
        latencyMs: 1,
        estimated: false,
      });
    }
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}

async function usedBytes(s: Storage): Promise<{ total: number; tables: Record<string, number> }> {
  const pragma = async (name: string) => Number(Object.values((await sql.raw(`pragma ${name}`).execute(s.db)).rows[0] as object)[0]);
  const total = ((await pragma('page_count')) - (await pragma('freelist_count'))) * (await pragma('page_size'));
  const tables: Record<string, number> = {};
  const rows = await sql<{ name: string; bytes: number }>`select name, sum(pgsize) as bytes from dbstat group by name order by bytes desc`
    .execute(s.db)
    .catch(() => ({ rows: [] }));
  for (const r of rows.rows.slice(0, 12)) tables[r.name] = Number(r.bytes);
  return { total, tables };
}

async function timed<T>(run: () => Promise<T>): Promise<[T, number]> {
  const t = performance.now();
  const out = await run();
  return [out, performance.now() - t];
}

const dir = mkdtempSync(join(tmpdir(), 'tollgate-storage-bench-'));
const s = openStorage(`sqlite:${join(dir, 'tollgate.db')}`);
try {
  await migrateToLatest(s);
  const payers = [];
  for (let i = 0; i < 100; i++) {
    const wallet = `0x${randomBytes(20).toString('hex')}`;
    await adjustBalance(s.db, { wallet, amountUsdc: 1_000_000_000_000 });
    payers.push({ wallet, key: await insertKey(s.db, wallet, generateKey(randomBytes(32)), 'bench') });
  }
  await drive(s, payers, oldRequests);
  const before = await usedBytes(s);
  const later = Date.now() + 100 * DAY;
  const [first, firstMs] = await timed(() => runLedgerCheck(s.db, { full: false, now: later }));
  await drive(s, payers, newRequests);
  const [full, fullMs] = await timed(() => runLedgerCheck(s.db, { full: true }));
  const [incremental, incrementalMs] = await timed(() => runLedgerCheck(s.db, { full: false, now: later }));
  if (!first.ok || !full.ok || !incremental.ok) throw new Error(`ledger check failed: ${[...full.problems, ...incremental.problems].slice(0, 5).join('; ')}`);
  const config = { enabled: true, usageDays: 30, reservationDays: 7, exportDir: join(dir, 'archive'), batchRows: 500, everySeconds: 60 };
  const [, retentionMs] = await timed(async () => {
    while ((await runRetentionPass(s, config, { now: later, holder: 'bench', budgetMs: 60_000 })).usage > 0);
  });
  await sql`vacuum`.execute(s.db);
  const afterRetention = await usedBytes(s);
  const requests = oldRequests + newRequests;
  const perMillion = (ms: number, entries: number) => (((ms / entries) * 1e6) / 1000).toFixed(2);
  console.log(`requests ${requests} (${oldRequests} old, retained away; ${newRequests} new, kept), 100 wallets, SQLite`);
  console.log(`bytes stored per request, before retention: ${(before.total / oldRequests).toFixed(0)} (${JSON.stringify(before.tables)})`);
  const after = (afterRetention.total / requests).toFixed(0);
  console.log(`bytes stored per request after retention + VACUUM: ${after} per request overall (${JSON.stringify(afterRetention.tables)})`);
  console.log(`retention of ${oldRequests} requests: ${retentionMs.toFixed(0)} ms`);
  console.log(`ledger-check full over ${full.entries} entries: ${fullMs.toFixed(0)} ms (${perMillion(fullMs, full.entries)} s per million entries)`);
  console.log(`ledger-check first (full + checkpoint): ${firstMs.toFixed(0)} ms; incremental over ${newRequests} new requests: ${incrementalMs.toFixed(0)} ms`);
} finally {
  await s.close();
  rmSync(dir, { recursive: true, force: true });
}
