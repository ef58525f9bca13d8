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
 * ceiling is above 0).
 *
 * The maximum a request's voucher must sign is therefore the first one at or above "charged +
 * ceiling" that no voucher has paid with: "charged + ceiling" itself, unless an honest client's
 * ceiling lands exactly on an earlier voucher's unused rest. Then it is one or more micro-USDC
 * higher, which the corrective 402 tells the client (channel-answers.ts): never a spent maximum, so
 * a voucher read from the chain can never be it. The request is still held and charged at most its
 * ceiling; the few micro-USDC above it are room in the voucher, never a charge.
 */
export async function expectedVoucherMax(db: Kysely<Database>, channelId: string, chargedPlusCeiling: number): Promise<number> {
  let expected = chargedPlusCeiling;
  for (;;) {
    const spent = await db
      .selectFrom('channel_spent_vouchers')
      .select('max_usdc')
      .where('channel_id', '=', channelId)
      .where('max_usdc', '>=', expected)
      .orderBy('max_usdc')
      .limit(SPENT_PAGE)
      .execute();
    for (const row of spent) {
      if (Number(row.max_usdc) !== expected) return expected;
      expected++;
    }
    if (spent.length < SPENT_PAGE) return expected;
  }
}

/** Spent maxima read at a time while looking for the first free one (a run of them is a handful at most). */
const SPENT_PAGE = 32;

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
