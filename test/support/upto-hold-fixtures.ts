import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { PaymentPayload } from '@x402/core/types';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { uptoHoldWallet } from '../../src/ledger/operations/upto-hold.ts';
import type { Insertable } from 'kysely';
import type { Storage } from '../../src/storage/database.ts';
import type { PaymentTable } from '../../src/storage/schema.ts';
import { newWallet, usageRecord } from './ledger.ts';

/** Fixtures for tests that drive the upto hold operations directly (no gateway, no chain). */

export const MAXIMUM = 1_000;
export const PAYLOAD = { x402Version: 2 } as unknown as PaymentPayload;

/**
 * A verified upto payment of MAXIMUM micro-USDC (6 decimals), still pending: what holdMaximum takes.
 * `beforeMigration014` writes it as a database not yet migrated to the payment state column holds it.
 */
export async function pendingUpto(s: Storage, payer = newWallet(), beforeMigration014 = false): Promise<{ id: string; payer: string }> {
  const id = randomUUID();
  const now = Date.now();
  await s.db
    .insertInto('payments')
    .values({
      id,
      network: 'eip155:84532',
      asset: '0x036cbd53842c5426634e7929541ec2318f3dcf7e',
      payer,
      nonce: `0x${id.replaceAll('-', '')}`,
      transfer_method: 'permit2',
      pay_to: '0x00000000000000000000000000000000000000ff',
      amount_atomic: String(MAXIMUM),
      amount_usdc: MAXIMUM,
      payload_digest: id,
      valid_before: 4_000_000_000,
      from_block: 0,
      status: 'pending',
      tx_hash: null,
      failure_reason: null,
      balance_after_usdc: null,
      locked_after_usdc: null,
      created_at: now,
      updated_at: now,
      credited_at: null,
      terms_digest: id,
      token_decimals: 6,
      onchain_amount_atomic: null,
      purpose: 'chat',
      upto_state: null,
      settle_amount_atomic: null,
      upto_payload: null,
      ...(beforeMigration014 ? {} : { state: 'pending' as const }),
    } as Insertable<PaymentTable>)
    .execute();
  return { id, payer };
}

/** A request on the hold wallet that charged `charge` (reserved the whole maximum, as the upto path does). Its request id. */
export async function spend(s: Storage, payer: string, charge: number): Promise<string> {
  const requestId = randomUUID();
  const wallet = uptoHoldWallet(payer);
  assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId, amountUsdc: MAXIMUM, leaseMs: 60_000 }), true);
  await finishReservation(s, requestId, charge, usageRecord(requestId, wallet));
  return requestId;
}

/** The ledger entries referencing payment `id`, as [kind, amount] in order. */
export async function entriesOf(s: Storage, id: string) {
  const rows = await s.db.selectFrom('ledger_entries').select(['kind', 'amount_usdc']).where('reference', '=', `payment:${id}`).orderBy('id').execute();
  return rows.map((r) => [r.kind, Number(r.amount_usdc)]);
}
