import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { expectedVoucherMax } from '../../src/payments/channels/spent-vouchers.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateTo, migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';

/**
 * Migration 021 (channel_spent_vouchers) on a database that already served channels. A channel row
 * written before it holds the voucher its last charged request came with (`signed_max_usdc`,
 * `signature`): the very voucher the background claimer puts on chain (claimWithSignature's
 * calldata). When that request was charged below its ceiling, the voucher lies above the channel's
 * charged amount, and "charged + ceiling" for a request of exactly the rest matches it: the attack
 * 02455cb closed (test/payments/channels/voucher-spent-from-claim.test.ts). The migration creates
 * the table empty, so every channel committed before the upgrade keeps its published voucher
 * spendable by anyone who reads the chain.
 */

const CHANNEL = `0x${'ab'.repeat(32)}`;
const SIGNED_MAX = 1_000_000;
const CHARGED = 400_000;

async function channelBefore021(db: Kysely<any>): Promise<void> {
  const now = Date.now();
  const addr = (n: number) => `0x${n.toString(16).padStart(40, '0')}`;
  await db
    .insertInto('channels')
    .values({
      channel_id: CHANNEL,
      network: 'eip155:31337',
      payer: addr(1),
      payer_authorizer: addr(1),
      receiver: addr(2),
      receiver_authorizer: addr(3),
      token: addr(4),
      withdraw_delay: 900,
      salt: `0x${'00'.repeat(32)}`,
      // One request: voucher for 0 + 1,000,000 (its ceiling), charged 400,000; claimed on chain since.
      charged_usdc: CHARGED,
      baseline_usdc: 0,
      signed_max_usdc: SIGNED_MAX,
      signature: `0x${'11'.repeat(65)}`,
      balance_usdc: 5_000_000,
      total_claimed_usdc: CHARGED,
      withdraw_requested_at: 0,
      refund_nonce: '0',
      synced_at: now,
      deposited_usdc: 5_000_000,
      refunded_usdc: 0,
      last_request_at: now,
      lease_owner: null,
      lease_until: null,
      pending_request: null,
      pending_max_usdc: null,
      pending_signature: null,
      pending_hold_usdc: null,
      last_refund_signature: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
}

for (const engine of ENGINES) {
  describe(`migration 021 on channels committed before it (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateTo(s, '020-payment-request-digest');
      await channelBefore021(s.db);
      await migrateToLatest(s);
    });
    after(() => s.close());

    test("a channel's last charged voucher, claimed on chain before the upgrade, pays for no other request after it", async () => {
      // The observer's request has a ceiling of exactly SIGNED_MAX − CHARGED: its voucher is the claimed one.
      assert.notEqual(
        await expectedVoucherMax(s.db, CHANNEL, SIGNED_MAX),
        SIGNED_MAX,
        `the voucher for ${SIGNED_MAX} paid for a request charged ${CHARGED} and is on chain, yet after the upgrade it matches "charged + ceiling" for a ceiling of ${SIGNED_MAX - CHARGED}`,
      );
    });
  });
}
