import { CompiledQuery, sql, type Kysely } from 'kysely';
import type { Storage } from '../storage/database.ts';
import type { Database } from '../storage/schema.ts';
import { bucketsAt, pgBucketExpressions } from '../keys/spend-periods.ts';
import { COUNT_RESERVATION, countReservationParams, FINISH_IN_BUCKETS, finishInBucketsParams, checkKeyLimit, type KeyLimitReached } from './key-spend.ts';

/**
 * Two-phase spending, as in TigerBeetle's pending transfers: a request first reserves an upper
 * bound of its cost (locked_usdc rises), then exactly one of settle (charge the true cost, release
 * the rest) or void (release everything) finishes it. A lease bounds how long a crash can leave
 * money locked: the sweeper voids reservations whose lease has run out.
 */
export interface ReserveRequest {
  wallet: string;
  apiKeyId: number;
  requestId: string;
  amountUsdc: number;
  leaseMs: number;
  /**
   * A hint from the (possibly seconds-old) cached key row: the key has a spend limit, so PostgreSQL
   * goes straight to the transaction that checks it. Only a hint: the limit itself is always read
   * in the unit that reserves.
   */
  keyHasLimit?: boolean;
}

export type ReserveOutcome =
  /**
   * `keyLimited`: the key had a spend limit when this reservation was admitted under it, so its
   * charge must stay within the reservation (the limit admitted exactly that much).
   */
  | { ok: true; keyLimited: boolean }
  | { ok: false; refused: 'balance' }
  | ({ ok: false; refused: 'key_limit' } & KeyLimitReached);

const LOCK_FUNDS = 'UPDATE wallets SET locked_usdc = locked_usdc + ?, updated_at = ? WHERE address = ? AND balance_usdc - locked_usdc >= ?';
const UNLOCK_FUNDS = 'UPDATE wallets SET locked_usdc = locked_usdc - ? WHERE address = ?';
const INSERT_RESERVATION = `INSERT INTO reservations
  (wallet, api_key_id, request_id, amount_usdc, status, charged_usdc, lease_expires_at, created_at, finished_at)
  VALUES (?, ?, ?, ?, 'pending', NULL, ?, ?, NULL)`;

// PostgreSQL does it all in one statement (data-modifying CTEs), so the wallet row is locked for one
// round trip instead of six (BEGIN, UPDATE, INSERT, INSERT, COMMIT). Only for a key without a spend
// limit: checking a limit needs a read of its buckets made after the wallet lock is taken, which
// one statement's snapshot cannot give. If the key has gained a limit, nothing is reserved and
// the transaction below decides. SQLite has no DML in CTEs, and needs none: its group commit
// already amortises the transaction.
const RESERVE_IN_ONE_STATEMENT = `WITH locked AS (
    UPDATE wallets SET locked_usdc = locked_usdc + $1, updated_at = $2
    WHERE address = $3 AND balance_usdc - locked_usdc >= $1
      AND NOT EXISTS (SELECT 1 FROM api_keys WHERE id = $4 AND spend_limit_usdc IS NOT NULL)
    RETURNING address
  ), counted AS (
    INSERT INTO key_spend (api_key_id, period, spent_usdc, locked_usdc)
    SELECT $4, b.period, 0, $1 FROM locked, (VALUES ('total'), ($7::text), ($8::text)) AS b(period)
    ON CONFLICT (api_key_id, period) DO UPDATE SET locked_usdc = key_spend.locked_usdc + excluded.locked_usdc
  )
  INSERT INTO reservations (wallet, api_key_id, request_id, amount_usdc, status, charged_usdc, lease_expires_at, created_at, finished_at)
  SELECT address, $4, $5, $1, 'pending', NULL, $6, $2, NULL FROM locked`;

/**
 * True when the wallet's available balance covered the amount and it is now locked. The promise
 * settles only after the reservation is committed, so the provider is never called on an
 * uncommitted one.
 */
export async function reserve(storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>, r: ReserveRequest, now = Date.now()): Promise<boolean> {
  return (await tryReserve(storage, r, now)).ok;
}

/**
 * Locks the amount in the wallet and counts it against the key's spend limit, in one atomic unit:
 * both hold, or nothing is reserved, and the outcome says which one refused. In-flight requests
 * count, so a limit that covers K requests admits exactly K of any number sent at once.
 */
export async function tryReserve(storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>, r: ReserveRequest, now = Date.now()): Promise<ReserveOutcome> {
  if (storage.engine === 'postgres' && !r.keyHasLimit) {
    const [, day, month] = bucketsAt(now);
    const result = await storage.db.executeQuery(CompiledQuery.raw(RESERVE_IN_ONE_STATEMENT, [r.amountUsdc, now, r.wallet, r.apiKeyId, r.requestId, now + r.leaseMs, day, month]));
    // Only taken by a key with no limit (the statement checks it), so nothing caps its charge.
    if (Number(result.numAffectedRows) === 1) return { ok: true, keyLimited: false };
    // Refused: the balance, or a limit set since the key was cached. The unit below tells which.
  }
  return storage.writeUnit(async (tx): Promise<ReserveOutcome> => {
    // One conditional UPDATE decides: concurrent reservations can never lock more than the balance.
    // It also takes the wallet's row lock, which every writer of the key's buckets holds.
    if ((await tx.run(LOCK_FUNDS, [r.amountUsdc, now, r.wallet, r.amountUsdc])) !== 1) return { ok: false, refused: 'balance' };
    const limit = await checkKeyLimit(tx, r.apiKeyId, r.amountUsdc, now);
    if (limit.refusal) {
      await tx.run(UNLOCK_FUNDS, [r.amountUsdc, r.wallet]);
      return { ok: false, refused: 'key_limit', ...limit.refusal };
    }
    await tx.run(COUNT_RESERVATION, countReservationParams(r.apiKeyId, r.amountUsdc, now));
    await tx.run(INSERT_RESERVATION, [r.wallet, r.apiKeyId, r.requestId, r.amountUsdc, now + r.leaseMs, now]);
    return { ok: true, keyLimited: limit.limited };
  });
}

export interface UsageRecord {
  requestId: string;
  apiKeyId: number;
  wallet: string;
  model: string;
  provider: string;
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  cachedTokens: number;
  providerCostUsdc: number;
  status: string;
  latencyMs: number;
  estimated: boolean;
}

export interface SettleOutcome {
  /** False when the reservation was already finished (settled, voided or swept): nothing changed. */
  applied: boolean;
  chargedUsdc: number;
  /** What could not be charged because the balance ran short (never driven negative). */
  shortfallUsdc: number;
  /** The wallet's balance right after this finish; null when nothing was applied (or deferred). */
  balanceUsdc: number | null;
  /**
   * The database did not answer, so the settle was written to the local spool (src/ledger/spool)
   * instead: it will be applied once the database answers. `chargedUsdc` is then the charge asked
   * for; what the balance allows is decided when it is applied.
   */
  deferred?: boolean;
}

// The conflict clause both engines share: a key's first finish inserts its totals row, every later
// one adds to it (in PostgreSQL under the row lock ON CONFLICT takes, so none is lost).
const ACCUMULATE = `ON CONFLICT (api_key_id) DO UPDATE SET
    request_count = usage_totals.request_count + 1,
    prompt_tokens = usage_totals.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = usage_totals.completion_tokens + excluded.completion_tokens,
    reasoning_tokens = usage_totals.reasoning_tokens + excluded.reasoning_tokens,
    cached_tokens = usage_totals.cached_tokens + excluded.cached_tokens,
    charged_usdc = usage_totals.charged_usdc + excluded.charged_usdc,
    provider_cost_usdc = usage_totals.provider_cost_usdc + excluded.provider_cost_usdc`;

// SQLite: the reservation and its wallet in one read. Group commit holds the only write lock, so
// nothing can change either row before this unit commits.
const READ_PENDING = `SELECT r.wallet, r.amount_usdc, r.api_key_id, r.created_at, w.balance_usdc, w.locked_usdc
  FROM reservations r JOIN wallets w ON w.address = r.wallet
  WHERE r.request_id = ? AND r.status = 'pending'`;
const CLOSE = "UPDATE reservations SET status = ?, charged_usdc = ?, finished_at = ? WHERE request_id = ? AND status = 'pending'";
const RELEASE_AND_CHARGE = 'UPDATE wallets SET locked_usdc = locked_usdc - ?, balance_usdc = balance_usdc - ?, updated_at = ? WHERE address = ? RETURNING balance_usdc';
export const INSERT_CHARGE = "INSERT INTO ledger_entries (wallet, kind, amount_usdc, reference, note, created_at) VALUES (?, 'charge', ?, ?, ?, ?)";
export const INSERT_USAGE = `INSERT INTO request_usage
  (request_id, api_key_id, wallet, model, provider, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens,
   charged_usdc, provider_cost_usdc, status, latency_ms, estimated, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
// Adds the usage row just written to its key's running totals (what GET /v1/usage reads). An
// increment in the database, never a read-modify-write here, so concurrent finishes all count.
export const ADD_TO_TOTALS = `INSERT INTO usage_totals
  (api_key_id, request_count, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, charged_usdc, provider_cost_usdc)
  VALUES (?, 1, ?, ?, ?, ?, ?, ?)
  ${ACCUMULATE}`;

const PENDING_BUCKETS = pgBucketExpressions('p.created_at');
/** The UTC day a usage row at `ms` counts towards in usage_daily (days since 1970-01-01). */
export const DAY_MS = 86_400_000;
export const usageDay = (ms: number): number => Math.floor(ms / DAY_MS);

const ACCUMULATE_DAILY = `ON CONFLICT (wallet, day, api_key_id) DO UPDATE SET
    request_count = usage_daily.request_count + 1,
    prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,
    charged_usdc = usage_daily.charged_usdc + excluded.charged_usdc`;
// The same row added to the wallet's totals for its day (the dashboard's 30-day chart reads them),
// in the same unit as the row, so the two never disagree; checkLedger verifies it.
export const ADD_TO_DAILY = `INSERT INTO usage_daily (wallet, day, api_key_id, request_count, prompt_tokens, completion_tokens, charged_usdc)
  VALUES (?, ?, ?, 1, ?, ?, ?)
  ${ACCUMULATE_DAILY}`;

// PostgreSQL does the whole finish in one statement, for the same reason as the reserve: the wallet
// row stays locked for one round trip instead of seven. `pending` locks the reservation and its
// wallet (FOR UPDATE waits for a concurrent finish, then re-checks `status = 'pending'` against the
// row it committed, so the loser finds nothing) and computes the charge from the locked, current
// wallet row. Every other sub-statement reads only `pending`, and each row is written once.
const FINISH_IN_ONE_STATEMENT = `WITH pending AS (
    SELECT r.wallet, r.amount_usdc AS reserved, r.api_key_id, r.created_at,
           GREATEST(0, LEAST($2::bigint, w.balance_usdc - (w.locked_usdc - r.amount_usdc))) AS charged
    FROM reservations r JOIN wallets w ON w.address = r.wallet
    WHERE r.request_id = $1 AND r.status = 'pending'
    FOR UPDATE
  ), closed AS (
    UPDATE reservations r SET status = CASE WHEN p.charged > 0 THEN 'settled' ELSE 'voided' END, charged_usdc = p.charged, finished_at = $3
    FROM pending p WHERE r.request_id = $1
  ), released AS (
    UPDATE wallets w SET locked_usdc = w.locked_usdc - p.reserved, balance_usdc = w.balance_usdc - p.charged, updated_at = $3
    FROM pending p WHERE w.address = p.wallet
    RETURNING w.balance_usdc
  ), charge AS (
    INSERT INTO ledger_entries (wallet, kind, amount_usdc, reference, note, created_at)
    SELECT p.wallet, 'charge', -p.charged, $1, $4, $3 FROM pending p WHERE p.charged > 0
  ), usage AS (
    INSERT INTO request_usage
      (request_id, api_key_id, wallet, model, provider, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens,
       charged_usdc, provider_cost_usdc, status, latency_ms, estimated, created_at)
    SELECT $1, $5, p.wallet, $4, $6, $7, $8, $9, $10, p.charged, CASE WHEN p.charged > 0 THEN $11::bigint ELSE 0 END, $12, $13, $14, $3
    FROM pending p
  ), totals AS (
    INSERT INTO usage_totals
      (api_key_id, request_count, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, charged_usdc, provider_cost_usdc)
    SELECT $5, 1, $7, $8, $9, $10, p.charged, CASE WHEN p.charged > 0 THEN $11::bigint ELSE 0 END
    FROM pending p
    ${ACCUMULATE}
  ), spend AS (
    UPDATE key_spend s SET spent_usdc = s.spent_usdc + p.charged, locked_usdc = s.locked_usdc - p.reserved
    FROM pending p WHERE s.api_key_id = p.api_key_id AND s.period IN ('total', ${PENDING_BUCKETS.day}, ${PENDING_BUCKETS.month})
  ), daily AS (
    INSERT INTO usage_daily (wallet, day, api_key_id, request_count, prompt_tokens, completion_tokens, charged_usdc)
    SELECT p.wallet, $15, $5, 1, $7, $8, p.charged FROM pending p
    ${ACCUMULATE_DAILY}
  )
  SELECT p.charged, r.balance_usdc FROM pending p, released r`;

/**
 * Finishes a reservation: charges `chargeUsdc` (0 voids it), releases the lock, writes the
 * request's usage row and adds it to its key's totals and its day's, all in one unit. The reservation's status
 * change is the exactly-once guard: a second settle or void of the same request changes nothing.
 */
export async function finishReservation(
  storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>,
  requestId: string,
  chargeUsdc: number,
  usage: UsageRecord,
  now = Date.now(),
): Promise<SettleOutcome> {
  const notApplied: SettleOutcome = { applied: false, chargedUsdc: 0, shortfallUsdc: 0, balanceUsdc: null };
  const outcome = (charged: number, balanceUsdc: number): SettleOutcome => ({ applied: true, chargedUsdc: charged, shortfallUsdc: chargeUsdc - charged, balanceUsdc });
  if (storage.engine === 'postgres') {
    const { rows } = await storage.db.executeQuery<{ charged: number; balance_usdc: number }>(
      CompiledQuery.raw(FINISH_IN_ONE_STATEMENT, [
        requestId, chargeUsdc, now, usage.model, usage.apiKeyId, usage.provider, usage.promptTokens, usage.completionTokens,
        usage.reasoningTokens, usage.cachedTokens, usage.providerCostUsdc, usage.status, usage.latencyMs, usage.estimated ? 1 : 0, usageDay(now),
      ]),
    );
    return rows[0] ? outcome(Number(rows[0].charged), Number(rows[0].balance_usdc)) : notApplied;
  }
  return storage.writeUnit(async (tx) => {
    const r = await tx.get<{ wallet: string; amount_usdc: number; api_key_id: number | null; created_at: number; balance_usdc: number; locked_usdc: number }>(
      READ_PENDING,
      [requestId],
    );
    if (!r) return notApplied;
    const reserved = Number(r.amount_usdc);
    // After releasing this reservation, the charge may use what is not locked by other requests.
    const payable = Number(r.balance_usdc) - (Number(r.locked_usdc) - reserved);
    const charged = Math.max(0, Math.min(chargeUsdc, payable));
    if ((await tx.run(CLOSE, [charged > 0 ? 'settled' : 'voided', charged, now, requestId])) !== 1) return notApplied;
    const after = await tx.get<{ balance_usdc: number }>(RELEASE_AND_CHARGE, [reserved, charged, now, r.wallet]);
    if (charged > 0) await tx.run(INSERT_CHARGE, [r.wallet, -charged, requestId, usage.model, now]);
    await tx.run(INSERT_USAGE, [
      requestId, usage.apiKeyId, r.wallet, usage.model, usage.provider, usage.promptTokens, usage.completionTokens, usage.reasoningTokens,
      usage.cachedTokens, charged, charged > 0 ? usage.providerCostUsdc : 0, usage.status, usage.latencyMs, usage.estimated ? 1 : 0, now,
    ]);
    await tx.run(ADD_TO_TOTALS, [
      usage.apiKeyId, usage.promptTokens, usage.completionTokens, usage.reasoningTokens, usage.cachedTokens, charged, charged > 0 ? usage.providerCostUsdc : 0,
    ]);
    if (r.api_key_id !== null) await tx.run(FINISH_IN_BUCKETS, finishInBucketsParams(charged, reserved, Number(r.api_key_id), Number(r.created_at)));
    await tx.run(ADD_TO_DAILY, [r.wallet, usageDay(now), usage.apiKeyId, usage.promptTokens, usage.completionTokens, charged]);
    return outcome(charged, Number(after!.balance_usdc));
  });
}

/**
 * Pushes the leases of live reservations forward (slow providers, long streams, drains), so the
 * sweeper leaves them alone. One statement for every request this instance is still running.
 */
export async function extendLeases(db: Kysely<Database>, requestIds: string[], leaseMs: number, now = Date.now()): Promise<void> {
  if (requestIds.length === 0) return;
  await db.updateTable('reservations').set({ lease_expires_at: now + leaseMs }).where('request_id', 'in', requestIds).where('status', '=', 'pending').execute();
}

/**
 * Voids reservations whose lease ran out: the request's process died before settling. Each is
 * released in its own transaction, guarded like a normal void, so a late settle and the sweeper
 * can never both act. It writes no usage row (the request never reported back), so it leaves the
 * usage totals alone too: they count exactly the request_usage rows.
 */
export async function sweepExpiredReservations(db: Kysely<Database>, now = Date.now()): Promise<number> {
  const expired = await db
    .selectFrom('reservations')
    .select('request_id')
    .where('status', '=', 'pending')
    .where('lease_expires_at', '<', now)
    .limit(500)
    .execute();
  let swept = 0;
  for (const { request_id } of expired) {
    const done = await db.transaction().execute(async (trx) => {
      const claimed = await trx
        .updateTable('reservations')
        .set({ status: 'voided', charged_usdc: 0, finished_at: now })
        .where('request_id', '=', request_id)
        .where('status', '=', 'pending')
        .returning(['wallet', 'amount_usdc', 'api_key_id', 'created_at'])
        .executeTakeFirst();
      if (!claimed) return false;
      const amount = Number(claimed.amount_usdc);
      await trx.updateTable('wallets').set({ locked_usdc: sql`locked_usdc - ${amount}`, updated_at: now }).where('address', '=', claimed.wallet).execute();
      // After the wallet (the lock order every writer of key_spend keeps): the key's buckets release it too.
      if (claimed.api_key_id !== null) {
        await trx
          .updateTable('key_spend')
          .set({ locked_usdc: sql`locked_usdc - ${amount}` })
          .where('api_key_id', '=', Number(claimed.api_key_id))
          .where('period', 'in', bucketsAt(Number(claimed.created_at)))
          .execute();
      }
      return true;
    });
    if (done) swept++;
  }
  return swept;
}
