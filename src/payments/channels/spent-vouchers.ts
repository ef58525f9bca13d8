import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../storage/schema.ts';

/**
 * The vouchers of a channel that already paid for a request, by their signed maximum. A voucher
 * signs only "the channel's charged amount plus this request's ceiling" and is bound to no request,
 * and the gateway's own claim puts it on chain (claimWithSignature's calldata). When its request
 * was charged less than its ceiling, the voucher still matches "charged + ceiling" for a request
 * whose ceiling is exactly what is left: anyone reading the chain could run a request of their
 * own on the payer's channel with it. So a voucher that paid once pays no more: its maximum is kept
 * while it still lies above the channel's charged amount (below it, it can match no request, whose
 * ceiling is above 0). An honest client never sends one again: each committed request raises the
 * charged amount, so its next voucher for the same ceiling is a new maximum.
 */
export async function voucherSpent(db: Kysely<Database>, channelId: string, maxUsdc: number): Promise<boolean> {
  const row = await db
    .selectFrom('channel_spent_vouchers')
    .select('max_usdc')
    .where('channel_id', '=', channelId)
    .where('max_usdc', '=', maxUsdc)
    .executeTakeFirst();
  return row !== undefined;
}

/** In the commit of a charged request: its voucher is spent; those the charge has passed are forgotten. */
export async function spendVoucher(trx: Transaction<Database>, channelId: string, maxUsdc: number, chargedUsdc: number): Promise<void> {
  await trx.deleteFrom('channel_spent_vouchers').where('channel_id', '=', channelId).where('max_usdc', '<=', chargedUsdc).execute();
  if (maxUsdc > chargedUsdc) {
    await trx
      .insertInto('channel_spent_vouchers')
      .values({ channel_id: channelId, max_usdc: maxUsdc })
      .onConflict((oc) => oc.columns(['channel_id', 'max_usdc']).doNothing())
      .execute();
  }
}
