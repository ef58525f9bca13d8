import { randomBytes, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { INITIAL_STATE } from '../../src/ledger/payment-states.ts';
import { stateColumns } from '../../src/payments/states.ts';
import type { Database } from '../../src/storage/schema.ts';

/** A payment of 1 USDC (6 decimals) recorded as openPayment records one, for tests of its states. */
export async function recordedPayment(db: Kysely<Database>, payer = `0x${randomBytes(20).toString('hex')}`): Promise<string> {
  const id = randomUUID();
  const now = Date.now();
  await db
    .insertInto('payments')
    .values({
      id,
      network: 'eip155:84532',
      asset: '0xasset',
      payer,
      nonce: `0x${randomBytes(32).toString('hex')}`,
      transfer_method: 'eip3009',
      pay_to: '0xpayto',
      amount_atomic: '1000000',
      amount_usdc: 1_000_000,
      payload_digest: `0x${randomBytes(32).toString('hex')}`,
      terms_digest: null,
      token_decimals: 6,
      onchain_amount_atomic: null,
      valid_before: 0,
      from_block: 1,
      ...stateColumns(INITIAL_STATE),
      tx_hash: null,
      failure_reason: null,
      balance_after_usdc: null,
      locked_after_usdc: null,
      created_at: now,
      updated_at: now,
      credited_at: null,
      purpose: 'topup',
      settle_amount_atomic: null,
      upto_payload: null,
    })
    .execute();
  return id;
}

export const randomTx = () => `0x${randomBytes(32).toString('hex')}`;

/**
 * A 1 USDC payment row as a database before migration 014 holds it (no `state` column): the
 * backfill's tests write each old combination of status, upto_state and failure_reason this way.
 */
export async function insertPaymentBefore014(
  db: Kysely<any>,
  row: { id: string; payer: string; status: string; upto: string | null; reason: string | null; createdAt: number; creditedAt?: number | null },
): Promise<void> {
  await db
    .insertInto('payments')
    .values({
      id: row.id,
      network: 'eip155:84532',
      asset: '0xasset',
      payer: row.payer,
      nonce: `0x${randomBytes(32).toString('hex')}`,
      transfer_method: 'eip3009',
      pay_to: '0xpayto',
      amount_atomic: '1000000',
      amount_usdc: 1_000_000,
      payload_digest: 'd',
      valid_before: 0,
      from_block: 1,
      status: row.status,
      upto_state: row.upto,
      tx_hash: null,
      failure_reason: row.reason,
      created_at: row.createdAt,
      updated_at: Date.now(),
      credited_at: row.creditedAt ?? null,
    })
    .execute();
}
