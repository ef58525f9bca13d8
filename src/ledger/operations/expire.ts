import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { kyselyUnit } from '../../storage/write-units.ts';
import { bucketValues } from '../effects/key-spend.ts';
import { closeReservation, statusAfter } from '../effects/reservation.ts';
import { boundOperands, unitStatement } from '../effects/statement.ts';
import { releaseAndCharge } from '../effects/wallet.ts';
import { FINISH_IN_BUCKETS } from './finish.ts';
import { assertAmount, assertWalletFloor } from '../assert.ts';

// The sweeper's void: the same close as a finish's, returning what it must release.
const CLAIM = unitStatement(`${closeReservation(boundOperands(), { whileStatus: 'pending' })} RETURNING wallet, amount_usdc, api_key_id, created_at`);
const RELEASE = unitStatement(`${releaseAndCharge(boundOperands())} RETURNING balance_usdc, locked_usdc`);

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
    const done = await kyselyUnit(db, async (tx) => {
      const claimed = await CLAIM.get<{ wallet: string; amount_usdc: number; api_key_id: number | null; created_at: number }>(tx, {
        status: statusAfter(0),
        charged: 0,
        at: now,
        requestId: request_id,
      });
      if (!claimed) return false;
      const released = Number(claimed.amount_usdc);
      assertAmount(`request ${request_id}'s release`, released);
      const after = await RELEASE.get<{ balance_usdc: number; locked_usdc: number }>(tx, { released, charged: 0, at: now, wallet: claimed.wallet });
      // A release gives back exactly what was locked: nothing can be unlocked twice.
      assertWalletFloor(claimed.wallet, Number(after!.balance_usdc), Number(after!.locked_usdc));
      // After the wallet (the lock order every writer of key_spend keeps): the key's buckets release it too.
      if (claimed.api_key_id !== null) {
        await FINISH_IN_BUCKETS.run(tx, { charged: 0, released, apiKeyId: Number(claimed.api_key_id), ...bucketValues(Number(claimed.created_at)) });
      }
      return true;
    });
    if (done) swept++;
  }
  return swept;
}
