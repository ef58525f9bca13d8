import { sql, type Kysely } from 'kysely';

/**
 * `channel_spent_vouchers`: the vouchers of a batch-settlement channel that already paid for a
 * request and still leave room above what the channel was charged (src/payments/channels/spent-vouchers.ts).
 * A voucher is public once the gateway claims it on chain, and one that paid for a request charged
 * below its ceiling would otherwise pay again for a request whose ceiling is the rest. Each channel's
 * latest committed voucher is recorded at once (the one a claim before the upgrade published). Older
 * vouchers a claim published, still above the charged amount, are known only to the chain's history:
 * the next charged request on the channel passes most of them (docs/DECISIONS.md).
 */
export function channelSpentVouchers() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('channel_spent_vouchers')
        .addColumn('channel_id', 'text', (c) => c.notNull())
        .addColumn('max_usdc', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('channel_spent_vouchers_pk', ['channel_id', 'max_usdc'])
        .execute();
      await sql`insert into channel_spent_vouchers (channel_id, max_usdc)
        select channel_id, signed_max_usdc from channels where signed_max_usdc is not null and signed_max_usdc > charged_usdc`.execute(db);
    },
  };
}
