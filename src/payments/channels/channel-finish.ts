import type { Kysely } from 'kysely';
import { holdChannelRequest, measureChannelHold, releaseChannelRequest } from '../../ledger/operations/channel-hold.ts';
import type { Database } from '../../storage/schema.ts';
import { spendVoucher } from './spent-vouchers.ts';

/** The voucher a request came with: what the channel adopts once the request is charged. */
export interface PendingVoucher {
  requestId: string;
  maxClaimableUsdc: number;
  signature: string;
  ceilingUsdc: number;
  /** The channel's charged amount the voucher was checked against (its maximum is this plus the ceiling, or a little more: spent-vouchers.ts). */
  chargedUsdc: number;
}

/**
 * The request `v.requestId` is now the channel's pending request, under `owner`'s lease, and its
 * ceiling is held on the channel's hold wallet (ledger/operations/channel-hold.ts): one
 * transaction, so a crash leaves both or neither. False when the lease was lost meanwhile.
 */
export async function startRequest(db: Kysely<Database>, channelId: string, owner: string, v: PendingVoucher, now: number): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const marked = await trx
      .updateTable('channels')
      .set({
        pending_request: v.requestId,
        pending_max_usdc: v.maxClaimableUsdc,
        pending_signature: v.signature,
        pending_hold_usdc: v.ceilingUsdc,
        updated_at: now,
      })
      .where('channel_id', '=', channelId)
      .where('lease_owner', '=', owner)
      .where('pending_request', 'is', null)
      // Still charged what the voucher was checked against: a commit in between (which always raises
      // it) means the voucher, checked before, may have been spent meanwhile.
      .where('charged_usdc', '=', v.chargedUsdc)
      .executeTakeFirst();
    if (Number(marked.numUpdatedRows) !== 1) return false;
    await holdChannelRequest(trx, channelId, v.requestId, v.ceilingUsdc, now);
    return true;
  });
}

export type FinishOutcome =
  | { kind: 'none' }
  /** Its reservation is still open (a stream, a spooled settle): nothing changed; the next request on the channel tries again. */
  | { kind: 'running'; requestId: string }
  | { kind: 'finished'; requestId: string; chargeUsdc: number; chargedUsdc: number };

/**
 * Commits the channel's pending request, whoever calls it: the request itself once its answer is
 * out, or, after a crash, the next request on the channel that takes over the expired lease. Its
 * charge is what the hold wallet lost (the bill's charge, capped at the ceiling), so the committed
 * state is the same whichever does it, and a request is committed once (the pending request is
 * cleared in the same transaction as its release). A charge of 0 (a failed request) leaves the
 * channel as it was, the voucher still unused: the client sends the same one again. The lease
 * stays with its holder (channel-store.ts dropLease gives it up). `only`: finish that request and
 * no other (a request committing itself must never finish the next one, which may not have
 * reserved on the hold wallet yet).
 */
export async function finishPending(db: Kysely<Database>, channelId: string, now: number, only?: string): Promise<FinishOutcome> {
  return db.transaction().execute(async (trx): Promise<FinishOutcome> => {
    const row = await trx
      .selectFrom('channels')
      .select(['pending_request', 'pending_max_usdc', 'pending_signature', 'charged_usdc'])
      .where('channel_id', '=', channelId)
      .executeTakeFirst();
    if (!row || row.pending_request === null || (only !== undefined && row.pending_request !== only)) return { kind: 'none' };
    const requestId = row.pending_request;
    const measured = await measureChannelHold(trx, channelId, now);
    if (measured.kind === 'running') return { kind: 'running', requestId };
    const charged = Number(row.charged_usdc) + measured.chargeUsdc;
    const signedMax = Number(row.pending_max_usdc);
    // The hold is the ceiling and the bill never charges above it: past the voucher is a bug.
    if (charged > signedMax) throw new Error(`channel ${channelId}: a charge to ${charged} above the voucher's ${signedMax}`);
    const committed =
      measured.chargeUsdc > 0 ? { charged_usdc: charged, signed_max_usdc: signedMax, signature: row.pending_signature, last_request_at: now } : {};
    await trx
      .updateTable('channels')
      .set({ ...committed, pending_request: null, pending_max_usdc: null, pending_signature: null, pending_hold_usdc: null, updated_at: now })
      .where('channel_id', '=', channelId)
      .where('pending_request', '=', requestId)
      .execute();
    if (measured.chargeUsdc > 0) await spendVoucher(trx, channelId, signedMax, charged);
    await releaseChannelRequest(trx, channelId, requestId, measured.unspentUsdc, now);
    return { kind: 'finished', requestId, chargeUsdc: measured.chargeUsdc, chargedUsdc: measured.chargeUsdc > 0 ? charged : Number(row.charged_usdc) };
  });
}
