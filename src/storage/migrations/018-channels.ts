import { sql, type Kysely } from 'kysely';
import type { Engine } from '../database.ts';
import { LEDGER_KINDS, ledgerKindsMigration } from './015-upto-ledger-kinds.ts';

/** The ledger kinds of an x402 `batch-settlement` channel's per-request hold (src/ledger/operations/channel-hold.ts). */
export const CHANNEL_LEDGER_KINDS = [...LEDGER_KINDS, 'channel_hold', 'channel_release'] as const;

/**
 * x402 `batch-settlement` channels (src/payments/channels/channel-store.ts says how each column is
 * written). Money is integer micro-USDC, which is the channel token's own unit: only 6-decimal
 * assets are offered for channels (channel-offer.ts), so an amount on chain and in the ledger is one
 * number. One row per channel id (the EIP-712 hash of its config, which is stored beside it):
 * - what the spec asks the server to keep: `charged_usdc` (chargedCumulativeAmount), the latest
 *   signed voucher (`signed_max_usdc`, `signature`), the mirrored on-chain fields and `synced_at`;
 * - `baseline_usdc`: the charged amount the row started from (the channel's on-chain totalClaimed
 *   when first seen), so ledger-check can prove that the ledger's holds minus releases are
 *   `charged_usdc − baseline_usdc`;
 * - the per-channel lease (`lease_owner`, `lease_until`) and the request it serialises
 *   (`pending_*`): taken by compare-and-set on this row, so requests on one channel run one at a
 *   time across every instance sharing the database;
 * - `deposited_usdc`/`refunded_usdc`: what went in and came back through this gateway.
 * - `last_refund_signature`: the voucher signature of the last cooperative refund, so a replayed
 *   refund payload is refused (channel-refund.ts);
 * `channel_transfers` records each on-chain transfer the gateway had made for a channel (deposit,
 * refund, and the background claims and settles), once per transaction hash.
 */
export function channels(engine: Engine) {
  const kinds = ledgerKindsMigration(engine, CHANNEL_LEDGER_KINDS);
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('channels')
        .addColumn('channel_id', 'text', (c) => c.primaryKey())
        .addColumn('network', 'text', (c) => c.notNull())
        .addColumn('payer', 'text', (c) => c.notNull())
        .addColumn('payer_authorizer', 'text', (c) => c.notNull())
        .addColumn('receiver', 'text', (c) => c.notNull())
        .addColumn('receiver_authorizer', 'text', (c) => c.notNull())
        .addColumn('token', 'text', (c) => c.notNull())
        .addColumn('withdraw_delay', 'integer', (c) => c.notNull())
        .addColumn('salt', 'text', (c) => c.notNull())
        .addColumn('charged_usdc', 'bigint', (c) => c.notNull().check(sql`charged_usdc >= 0`))
        .addColumn('baseline_usdc', 'bigint', (c) => c.notNull())
        .addColumn('signed_max_usdc', 'bigint')
        .addColumn('signature', 'text')
        .addColumn('balance_usdc', 'bigint', (c) => c.notNull())
        .addColumn('total_claimed_usdc', 'bigint', (c) => c.notNull())
        .addColumn('withdraw_requested_at', 'bigint', (c) => c.notNull())
        .addColumn('refund_nonce', 'text', (c) => c.notNull())
        .addColumn('synced_at', 'bigint', (c) => c.notNull())
        .addColumn('deposited_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('refunded_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('last_request_at', 'bigint')
        .addColumn('lease_owner', 'text')
        .addColumn('lease_until', 'bigint')
        .addColumn('pending_request', 'text')
        .addColumn('pending_max_usdc', 'bigint')
        .addColumn('pending_signature', 'text')
        .addColumn('pending_hold_usdc', 'bigint')
        .addColumn('last_refund_signature', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('channels_payer').on('channels').column('payer').execute();
      await db.schema
        .createTable('channel_transfers')
        .addColumn('id', engine === 'postgres' ? 'bigserial' : 'integer', (c) => (engine === 'postgres' ? c.primaryKey() : c.primaryKey().autoIncrement()))
        .addColumn('channel_id', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('amount_usdc', 'bigint', (c) => c.notNull())
        .addColumn('tx_hash', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('channel_transfers_once').on('channel_transfers').columns(['kind', 'tx_hash', 'channel_id']).unique().execute();
      await kinds.up(db);
    },
  };
}
