import { gunzipSync } from 'node:zlib';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import type { RetentionConfig } from '../../src/config/schema.ts';
import type { Storage } from '../../src/storage/database.ts';
import { usageByKey } from '../../src/usage/usage.ts';
import { dailyUsage } from '../../src/usage/usage-daily.ts';
import { newWallet, usageRecord } from './ledger.ts';

export const DAY = 86_400_000;

/**
 * `requests` requests through the ledger's own operations, spread over `wallets` funded wallets
 * and two keys: reserve then settle (every fifth voided, charged nothing), plus one reservation
 * left pending per wallet. Returns the wallets.
 */
export async function seedRequests(s: Storage, requests: number, wallets = 4, tag = 'r'): Promise<string[]> {
  const ws = Array.from({ length: wallets }, () => newWallet());
  for (const w of ws) await adjustBalance(s.db, { wallet: w, amountUsdc: 100_000_000 });
  const one = async (i: number) => {
    const w = ws[i % wallets]!;
    const id = `${w}-${tag}${i}`;
    await reserve(s, { wallet: w, apiKeyId: 1 + (i % 2), requestId: id, amountUsdc: 500, leaseMs: 600_000 });
    await finishReservation(s, id, i % 5 === 0 ? 0 : 100 + (i % 300), { ...usageRecord(id, w), apiKeyId: 1 + (i % 2), promptTokens: i % 97 });
  };
  for (let i = 0; i < requests; i += 50) await Promise.all(Array.from({ length: Math.min(50, requests - i) }, (_, k) => one(i + k)));
  for (const w of ws) await reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-${tag}-pending`, amountUsdc: 700, leaseMs: 600_000 });
  return ws;
}

/** What two ledger-checks must agree on: the totals and the problems, not where each started. */
export const checkTotals = (c: { ok: boolean; wallets: number; entries: number; creditsUsdc: number; chargesUsdc: number; problems: string[] }) => ({
  ok: c.ok,
  wallets: c.wallets,
  entries: c.entries,
  creditsUsdc: c.creditsUsdc,
  chargesUsdc: c.chargesUsdc,
  problems: c.problems,
});

/** What the usage API serves a wallet: per-key totals and the last 30 days. */
export async function usageApiView(s: Storage, wallets: string[], now = Date.now()) {
  return Promise.all(wallets.map(async (w) => ({ keys: await usageByKey(s.db, w), daily: (await dailyUsage(s.db, w, 30, now)).rows })));
}

export const retentionConfig = (exportDir: string, over: Partial<RetentionConfig> = {}): RetentionConfig => ({
  enabled: true,
  usageDays: 3,
  reservationDays: 1,
  exportDir,
  batchRows: 100,
  everySeconds: 60,
  ...over,
});

/** Every exported row's id, with repeats, from all the export files in `dir`. */
export function exportedIds(dir: string): number[] {
  const ids: number[] = [];
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.jsonl.gz'))) {
    for (const line of gunzipSync(readFileSync(join(dir, f)))
      .toString()
      .split('\n')
      .filter(Boolean))
      ids.push(JSON.parse(line).id);
  }
  return ids;
}

/** Drops the append-only guard of ledger_entries, so a test can tamper with an entry as an attacker with database access could. */
export async function tamperEntry(s: Storage, id: number, delta: number): Promise<void> {
  const { sql } = await import('kysely');
  if (s.engine === 'sqlite') await sql`drop trigger if exists ledger_entries_no_update`.execute(s.db);
  else await sql`drop trigger if exists ledger_entries_append_only on ledger_entries`.execute(s.db);
  await sql`update ledger_entries set amount_usdc = amount_usdc + ${delta} where id = ${id}`.execute(s.db);
}

/** Everything a checkpoint consists of: its rows and the sums kept for the latest one, each table's rows as sorted JSON. */
export async function checkpointState(s: Storage): Promise<string[][]> {
  const { sql } = await import('kysely');
  const all = async (table: string) =>
    (await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(s.db)).rows.map((r) => JSON.stringify(r)).sort();
  return Promise.all(['ledger_checkpoints', 'ledger_checkpoint_wallets', 'ledger_checkpoint_usage', 'ledger_checkpoint_days'].map(all));
}
