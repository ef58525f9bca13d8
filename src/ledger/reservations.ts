import type { Storage } from '../storage/database.ts';

/**
 * Two-phase spending, as in TigerBeetle's pending transfers: a request first reserves an upper
 * bound of its cost (locked_usdc rises), then exactly one of settle (charge the true cost, release
 * the rest) or void (release everything) finishes it. A lease bounds how long a crash can leave
 * money locked: the sweeper voids reservations whose lease has run out. The operations are in
 * operations/ (reserve, finish, late charge, expire), each composed of the effects in effects/.
 */

export interface UsageRecord {
  requestId: string;
  apiKeyId: number;
  wallet: string;
  model: string;
  provider: string;
  /** The deployment that served (`provider/upstreamName`, src/routing/); null when none did. Absent in settles spooled before it existed. */
  deployment?: string | null;
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  cachedTokens: number;
  providerCostUsdc: number;
  status: string;
  latencyMs: number;
  estimated: boolean;
}

/** A produced answer's bill: what `finishReservation` is asked, kept whole so it can be retried or spooled. */
export interface SettleRecord {
  requestId: string;
  wallet: string;
  chargeUsdc: number;
  usage: UsageRecord;
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

/**
 * Pushes the leases of live reservations forward (slow providers, long streams, drains), so the
 * sweeper leaves them alone. One statement for every request this instance is still running.
 *
 * On PostgreSQL it skips the rows a ledger batch has locked (SKIP LOCKED): a batch finishing many
 * of these requests holds some of their rows and waits for the next, and a renewal that waited for
 * the rows the batch holds while holding the ones it wants would be a lock cycle, a second's stall
 * until PostgreSQL broke it. A row skipped is being finished; if that batch rolls back, the next
 * renewal (a third of the lease later) extends it.
 */
export async function extendLeases(storage: Pick<Storage, 'db' | 'engine'>, requestIds: string[], leaseMs: number, now = Date.now()): Promise<void> {
  if (requestIds.length === 0) return;
  const renew = storage.db.updateTable('reservations').set({ lease_expires_at: now + leaseMs });
  if (storage.engine === 'sqlite') {
    await renew.where('request_id', 'in', requestIds).where('status', '=', 'pending').execute();
    return;
  }
  const free = storage.db
    .selectFrom('reservations')
    .select('id')
    .where('request_id', 'in', requestIds)
    .where('status', '=', 'pending')
    .forUpdate()
    .skipLocked();
  await renew.where('id', 'in', free).execute();
}
