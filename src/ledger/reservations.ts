import { sql, type Kysely } from 'kysely';
import type { Engine } from '../storage/database.ts';
import type { Database } from '../storage/schema.ts';

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
}

/** Thrown inside the reserve transaction to roll back the reservation row. */
class CannotCover extends Error {}

/** True when the wallet's available balance covered the amount and it is now locked. */
export async function reserve(db: Kysely<Database>, r: ReserveRequest, now = Date.now()): Promise<boolean> {
  try {
    await db.transaction().execute(async (trx) => {
      // One conditional UPDATE decides: concurrent reservations can never lock more than the balance.
      const locked = await trx
        .updateTable('wallets')
        .set({ locked_usdc: sql`locked_usdc + ${r.amountUsdc}`, updated_at: now })
        .where('address', '=', r.wallet)
        .where(sql<boolean>`balance_usdc - locked_usdc >= ${r.amountUsdc}`)
        .executeTakeFirst();
      if (Number(locked.numUpdatedRows) !== 1) throw new CannotCover();
      await trx
        .insertInto('reservations')
        .values({
          wallet: r.wallet,
          api_key_id: r.apiKeyId,
          request_id: r.requestId,
          amount_usdc: r.amountUsdc,
          status: 'pending',
          charged_usdc: null,
          lease_expires_at: now + r.leaseMs,
          created_at: now,
          finished_at: null,
        })
        .execute();
    });
    return true;
  } catch (err) {
    if (err instanceof CannotCover) return false;
    throw err;
  }
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
}

/**
 * Finishes a reservation: charges `chargeUsdc` (0 voids it), releases the lock, and writes the
 * request's usage row, all in one transaction. The reservation's status change is the exactly-once
 * guard: a second settle or void of the same request changes nothing.
 */
export async function finishReservation(
  db: Kysely<Database>,
  engine: Engine,
  requestId: string,
  chargeUsdc: number,
  usage: UsageRecord,
  now = Date.now(),
): Promise<SettleOutcome> {
  return db.transaction().execute(async (trx) => {
    const claimed = await trx
      .updateTable('reservations')
      .set({ status: chargeUsdc > 0 ? 'settled' : 'voided', finished_at: now })
      .where('request_id', '=', requestId)
      .where('status', '=', 'pending')
      .returning(['wallet', 'amount_usdc'])
      .executeTakeFirst();
    if (!claimed) return { applied: false, chargedUsdc: 0, shortfallUsdc: 0 };
    const reserved = Number(claimed.amount_usdc);
    const wallet = claimed.wallet;

    let charged = 0;
    if (chargeUsdc > 0) {
      let walletQuery = trx.selectFrom('wallets').select(['balance_usdc', 'locked_usdc']).where('address', '=', wallet);
      if (engine === 'postgres') walletQuery = walletQuery.forUpdate();
      const w = await walletQuery.executeTakeFirstOrThrow();
      // After releasing this reservation, the charge may use what is not locked by other requests.
      const payable = Number(w.balance_usdc) - (Number(w.locked_usdc) - reserved);
      charged = Math.max(0, Math.min(chargeUsdc, payable));
    }
    await trx
      .updateTable('wallets')
      .set({ locked_usdc: sql`locked_usdc - ${reserved}`, balance_usdc: sql`balance_usdc - ${charged}`, updated_at: now })
      .where('address', '=', wallet)
      .execute();
    if (charged > 0) {
      await trx
        .insertInto('ledger_entries')
        .values({ wallet, kind: 'charge', amount_usdc: -charged, reference: requestId, note: usage.model, created_at: now })
        .execute();
    }
    await trx.updateTable('reservations').set({ charged_usdc: charged, status: charged > 0 ? 'settled' : 'voided' }).where('request_id', '=', requestId).execute();
    await trx
      .insertInto('request_usage')
      .values({
        request_id: requestId,
        api_key_id: usage.apiKeyId,
        wallet,
        model: usage.model,
        provider: usage.provider,
        prompt_tokens: usage.promptTokens,
        completion_tokens: usage.completionTokens,
        reasoning_tokens: usage.reasoningTokens,
        cached_tokens: usage.cachedTokens,
        charged_usdc: charged,
        provider_cost_usdc: charged > 0 ? usage.providerCostUsdc : 0,
        status: usage.status,
        latency_ms: usage.latencyMs,
        estimated: usage.estimated ? 1 : 0,
        created_at: now,
      })
      .execute();
    return { applied: true, chargedUsdc: charged, shortfallUsdc: chargeUsdc - charged };
  });
}

/** Pushes a live reservation's lease forward (long streams), so the sweeper leaves it alone. */
export async function extendLease(db: Kysely<Database>, requestId: string, leaseMs: number, now = Date.now()): Promise<void> {
  await db.updateTable('reservations').set({ lease_expires_at: now + leaseMs }).where('request_id', '=', requestId).where('status', '=', 'pending').execute();
}

/**
 * Voids reservations whose lease ran out: the request's process died before settling. Each is
 * released in its own transaction, guarded like a normal void, so a late settle and the sweeper
 * can never both act.
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
        .returning(['wallet', 'amount_usdc'])
        .executeTakeFirst();
      if (!claimed) return false;
      await trx.updateTable('wallets').set({ locked_usdc: sql`locked_usdc - ${Number(claimed.amount_usdc)}`, updated_at: now }).where('address', '=', claimed.wallet).execute();
      return true;
    });
    if (done) swept++;
  }
  return swept;
}
