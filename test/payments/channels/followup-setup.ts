import assert from 'node:assert/strict';
import type { PublicClient } from 'viem';
import { auditChannelsOnChain } from '../../../src/payments/channels/channel-audit.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

/** The transactions waiting in anvil's pool (mining paused): what the gateway broadcast meanwhile. */
export async function pooled(h: PayPerRequestHarness): Promise<number> {
  const status = (await h.anvil.rpc('txpool_status', [])) as { pending: string; queued: string };
  return Number(status.pending) + Number(status.queued);
}

/** `ledger-check --chain` finds the books equal to the contract, and the ledger's own invariants hold. */
export async function assertBooksEqualChain(h: PayPerRequestHarness): Promise<void> {
  const audit = await auditChannelsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network) as PublicClient);
  assert.deepEqual(audit.problems, [], 'ledger-check --chain: the books equal the contract');
  await assertLedgerConsistent(h.gw.services.storage.db);
}

/** The channel's hold expires now (its 15 minutes passed), as a clock moved forward would make it. */
export async function expireHold(h: PayPerRequestHarness, channelId: string): Promise<void> {
  await h.gw.services.storage.db
    .updateTable('channels')
    .set({ lease_until: Date.now() - 1 })
    .where('channel_id', '=', channelId)
    .execute();
}
