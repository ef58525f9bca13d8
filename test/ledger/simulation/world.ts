import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { adjustBalance } from '../../../src/ledger/movements.ts';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import type { UsageRecord } from '../../../src/ledger/reservations.ts';
import { generateKey, insertKey } from '../../../src/keys/api-keys.ts';
import { NO_LIMITS } from '../../../src/keys/limits.ts';
import { payPerRequestKey } from '../../../src/payments/pay-per-request/wallet-key.ts';
import { uptoHoldWallet } from '../../../src/payments/upto/upto-store.ts';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { migrateToLatest } from '../../../src/storage/migrate.ts';
import { freshSqliteUrl } from '../../support/sqlite-engine.ts';
import type { LedgerModel } from './model.ts';

/**
 * The real side of the ledger simulation: a SQLite database on disk, the wallets and keys the
 * commands act on, and the comparison of its books with the reference model after every step.
 */
export interface World {
  url: string;
  storage: Storage;
  /** Addresses by model wallet index; the last is the upto payer's hold wallet. */
  wallets: string[];
  /** API key ids by model key index. */
  keys: number[];
  payer: string;
}

export const START = Date.UTC(2026, 0, 31, 22, 0, 0); // two hours before a day's and a month's end
const FUNDS = [5_000, 3_000];
const FIRST_LIMIT = 2_000;
let worlds = 0;

/** A fresh database: two funded wallets (the first also the upto payer), three keys on them, and the hold wallet's key. */
export async function openWorld(): Promise<{ model: LedgerModel; real: World }> {
  const url = freshSqliteUrl();
  const storage = openStorage(url);
  await migrateToLatest(storage);
  const n = ++worlds;
  const plain = FUNDS.map((_, i) => `0x${(n * 16 + i).toString(16).padStart(40, '0')}`);
  for (const [i, wallet] of plain.entries()) await adjustBalance(storage.db, { wallet, amountUsdc: FUNDS[i]! });
  const secret = randomBytes(32);
  const keyOwners = [0, 0, 1];
  const keys: number[] = [];
  // Key 1 starts with a daily limit, so reserves and late charges meet one from the first step.
  for (const [i, owner] of keyOwners.entries()) {
    const limits = i === 1 ? { ...NO_LIMITS, spend_limit_usdc: FIRST_LIMIT, spend_limit_period: 'day' as const } : NO_LIMITS;
    keys.push((await insertKey(storage.db, plain[owner]!, generateKey(secret), 'simulation', limits, START)).id);
  }
  const payer = plain[0]!;
  const hold = uptoHoldWallet(payer);
  keys.push((await payPerRequestKey(storage.db, hold, START)).id);
  const model: LedgerModel = {
    now: START,
    wallets: [...FUNDS.map((balance) => ({ balance, locked: 0 })), { balance: 0, locked: 0 }],
    keys: [
      ...keyOwners.map((wallet, i) => (i === 1 ? { wallet, limit: FIRST_LIMIT, period: 'day' as const } : { wallet, limit: null, period: null })),
      { wallet: 2, limit: null, period: null },
    ],
    spend: new Map(),
    reservations: [],
    upto: null,
    payments: 0,
  };
  return { model, real: { url, storage, wallets: [...plain, hold], keys, payer } };
}

/** Crash and restart: the database closed under the model (nothing in flight) and opened again as a starting gateway does. */
export async function reopen(w: World): Promise<void> {
  await w.storage.close();
  w.storage = openStorage(w.url);
  await migrateToLatest(w.storage);
}

export function usageOf(w: World, m: LedgerModel, requestId: string, key: number): UsageRecord {
  return {
    requestId,
    apiKeyId: w.keys[key]!,
    wallet: w.wallets[m.keys[key]!.wallet]!,
    model: 'sim/model',
    provider: 'sim',
    promptTokens: 10,
    completionTokens: 5,
    reasoningTokens: 0,
    cachedTokens: 0,
    providerCostUsdc: 1,
    status: 'ok',
    latencyMs: 1,
    estimated: false,
  };
}

/** After every step: the ledger's own invariants hold, and its balances, locks, key spend and reservations are the model's. */
export async function assertAgrees(m: LedgerModel, w: World): Promise<void> {
  const db = w.storage.db;
  assert.deepEqual((await checkLedger(db)).problems, []);
  const rows = await db.selectFrom('wallets').select(['address', 'balance_usdc', 'locked_usdc']).execute();
  const byAddress = new Map(rows.map((r) => [r.address, { balance: Number(r.balance_usdc), locked: Number(r.locked_usdc) }]));
  assert.deepEqual(
    w.wallets.map((a) => byAddress.get(a) ?? { balance: 0, locked: 0 }),
    m.wallets,
    'balances and locked amounts',
  );
  const spend = await db.selectFrom('key_spend').select(['api_key_id', 'period', 'spent_usdc', 'locked_usdc']).execute();
  const bucketId = (r: { api_key_id: number; period: string }) => `${w.keys.indexOf(Number(r.api_key_id))}|${r.period}`;
  const actual = spend.map((r) => [bucketId(r), { spent: Number(r.spent_usdc), locked: Number(r.locked_usdc) }] as const);
  assert.deepEqual(new Map(actual), m.spend, 'key spend per period bucket');
  const reservations = await db.selectFrom('reservations').select(['request_id', 'status', 'charged_usdc']).orderBy('id').execute();
  assert.deepEqual(
    reservations.map((r) => ({ requestId: r.request_id, status: r.status, charged: Number(r.charged_usdc ?? 0) })),
    m.reservations.map((r) => ({ requestId: r.requestId, status: r.status, charged: r.charged })),
    'reservations',
  );
}
