import assert from 'node:assert/strict';
import { toHex, type Hex, type PublicClient } from 'viem';
import { FacilitatorUnavailable } from '../../../src/payments/facilitator/facilitator.ts';
import { auditChannelsOnChain } from '../../../src/payments/channels/channel-audit.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { claimPass, reader } from './claims-setup.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { askRefund, refundsOf, signedRefund } from './review-refund-setup.ts';

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

/**
 * The node forgets the refund `hash` and mines the same call from the same sender and nonce at a
 * higher fee instead (a re-broadcast): the refund lands under a hash the gateway never saw.
 */
export async function replaceWithHigherFee(h: PayPerRequestHarness, hash: string): Promise<Hex> {
  const sent = await reader(h).getTransaction({ hash: hash as Hex });
  await h.anvil.rpc('anvil_dropTransaction', [hash]);
  await h.anvil.rpc('anvil_impersonateAccount', [sent.from]);
  const fees =
    sent.maxFeePerGas === undefined
      ? { gasPrice: toHex((sent.gasPrice ?? 1n) * 2n) }
      : { maxFeePerGas: toHex(sent.maxFeePerGas * 2n), maxPriorityFeePerGas: toHex((sent.maxPriorityFeePerGas ?? 0n) * 2n + 1n) };
  const replacement = (await h.anvil.rpc('eth_sendTransaction', [
    { from: sent.from, to: sent.to, data: sent.input, gas: toHex(sent.gas), nonce: toHex(sent.nonce), ...fees },
  ])) as Hex;
  await h.anvil.rpc('anvil_stopImpersonatingAccount', [sent.from]);
  assert.notEqual(replacement.toLowerCase(), hash.toLowerCase());
  return replacement;
}

/** The facilitator stand-in for refunds: the real one's settle, then a throw (`after`), or a throw without calling it. */
export function facilitatorThrowsOnRefund(h: PayPerRequestHarness, when: 'before' | 'after'): () => void {
  const f = h.gw.services.topup!.facilitator as { settle: (...a: unknown[]) => Promise<unknown> };
  const realSettle = f.settle;
  f.settle = async (...a: unknown[]) => {
    const payload = (a[0] as { payload?: { type?: string } }).payload;
    if (payload?.type !== 'refund') return realSettle.apply(f, a);
    if (when === 'after') await realSettle.apply(f, a);
    throw new FacilitatorUnavailable(`the facilitator's connection broke ${when} sending the refund (test)`);
  };
  return () => {
    f.settle = realSettle;
  };
}

/** A reader whose log search the RPC refuses (a provider without eth_getLogs, or one failing it now). */
export const withoutLogs = (client: PublicClient): PublicClient =>
  new Proxy(client, {
    get: (target, key, receiver) =>
      key === 'getLogs' ? () => Promise.reject(new Error('eth_getLogs is not served here')) : Reflect.get(target, key, receiver),
  });

/**
 * The gateway's chain reader refuses eth_getLogs until the returned function restores it: the payer's
 * retry and a claim pass (claimDeps reads through the same reader) find no event.
 */
export function logSearchRefused(h: PayPerRequestHarness): () => void {
  const topup = h.gw.services.topup!;
  const clientFor = topup.clientFor;
  topup.clientFor = (network) => {
    const client = clientFor(network);
    return client && withoutLogs(client);
  };
  return () => {
    topup.clientFor = clientFor;
  };
}

/** The channel stays held for its refund and nothing of it is booked: the refund is in, its amount not yet known. */
export async function assertHeldUnbooked(h: PayPerRequestHarness, channelId: string): Promise<void> {
  const row = await h.gw.services.storage.db.selectFrom('channels').selectAll().where('channel_id', '=', channelId).executeTakeFirstOrThrow();
  assert.equal(row.lease_owner?.startsWith('refund-tx:'), true, `still held for its refund: ${row.lease_owner}`);
  assert.equal(Number(row.refunded_usdc), 0, 'refunded_usdc counts nothing');
  assert.deepEqual(await refundsOf(h, channelId), [], 'no refund transfer booked from a guess');
}

/** `account` asks its refund from a facilitator that broadcasts it and then throws: 503, held as refund-tx:unknown, the refund landed. */
export async function refundThrownAfterBroadcast(h: PayPerRequestHarness, account: FundedAccount): Promise<string> {
  const header = await signedRefund(h, account);
  const restore = facilitatorThrowsOnRefund(h, 'after');
  try {
    const first = await askRefund(h, header);
    assert.equal(first.status, 503, first.text);
  } finally {
    restore();
  }
  return header;
}

/**
 * With the RPC refusing log searches, a held refund the chain shows landed: the claim pass books nothing and reports
 * `channelId` unresolved at `nonce`, the payer's retry (`header`) is answered 503 PAYMENT_PENDING, the channel stays held.
 */
export async function assertUnbookedWithoutLogs(h: PayPerRequestHarness, channelId: string, nonce: string, header: string): Promise<void> {
  const restore = logSearchRefused(h);
  try {
    const pass = await claimPass(h, {}, true);
    assert.deepEqual(pass.refunds, [], pass.failures.join('\n'));
    assert.deepEqual(
      pass.unresolved.map((u) => [u.channel, u.nonce]),
      [[channelId, nonce]],
      'the pass reports the refund it could not book',
    );
    const retry = await askRefund(h, header);
    assert.equal(retry.status, 503, retry.text);
    assert.equal(retry.body.error, 'PAYMENT_PENDING');
    await assertHeldUnbooked(h, channelId);
  } finally {
    restore();
  }
}
