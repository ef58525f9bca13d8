import assert from 'node:assert/strict';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { computeChannelId, signVoucher } from '@x402/evm/batch-settlement/client';
import type { PublicClient } from 'viem';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { auditChannelsOnChain } from '../../../src/payments/channels/channel-audit.ts';
import { call } from '../../support/gateway.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { channelOf, channelOffersOf, channelPayer, openedChannel } from './channel-harness.ts';

/** A review's refund left unconfirmed: anvil's mining paused past the gateway's receipt wait (2 s in these suites). */
export const SHORT_WAIT = { topup: { settleWaitSeconds: 2 } };

/** A refund payload for `payer`'s stock-client channel, its voucher signing what the channel has been charged now. */
export async function signedRefund(h: PayPerRequestHarness, payer: FundedAccount): Promise<string> {
  const probe = await call(h.gw.url, 'GET', '/v1/channels/refund');
  assert.equal(probe.status, 402, probe.text);
  const offer = channelOffersOf(probe.body.accepts as PaymentRequirements[]).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
  const config = channelPayer(h, payer).scheme.buildChannelConfig(offer);
  const charged = (await channelOf(h, payer))!.charged_usdc;
  const voucher = await signVoucher(toClientEvmSigner(payer), computeChannelId(config, offer.network), String(charged), offer.network);
  return v2Header(offer, { type: 'refund', channelConfig: config, voucher });
}

export const askRefund = (h: PayPerRequestHarness, header: string) => call(h.gw.url, 'GET', '/v1/channels/refund', undefined, { 'payment-signature': header });

/** A channel whose refund was sent and answered 503 pending; `mine` resumes mining. */
export async function pendingRefund(h: PayPerRequestHarness) {
  const payer = await openedChannel(h);
  const before = (await channelOf(h, payer))!;
  const payerUsdc = await h.chain.balanceOf(h.chain.usdc, payer.address);
  const header = await signedRefund(h, payer);
  await h.anvil.rpc('evm_setAutomine', [false]);
  const first = await askRefund(h, header);
  const mine = async () => {
    await h.anvil.rpc('evm_setAutomine', [true]);
    await h.anvil.rpc('evm_mine', []);
  };
  if (first.status !== 503) await mine();
  assert.equal(first.status, 503, first.text);
  return { payer, before, payerUsdc, header, transaction: first.body.transaction as string, mine };
}

export type PendingRefund = Awaited<ReturnType<typeof pendingRefund>>;

/** The refund transfers recorded for `channelId`: [amount, tx]. */
export async function refundsOf(h: PayPerRequestHarness, channelId: string): Promise<Array<[number, string]>> {
  const rows = await h.gw.services.storage.db
    .selectFrom('channel_transfers')
    .select(['amount_usdc', 'tx_hash'])
    .where('kind', '=', 'refund')
    .where('channel_id', '=', channelId)
    .execute();
  return rows.map((t) => [Number(t.amount_usdc), t.tx_hash]);
}

/** Refunded once on chain and in the books, the mirror equal to the contract, the ledger consistent. */
export async function assertRefundRecordedOnce(h: PayPerRequestHarness, r: PendingRefund): Promise<void> {
  const owed = r.before.balance_usdc - r.before.charged_usdc;
  assert.equal(await h.chain.balanceOf(h.chain.usdc, r.payer.address), r.payerUsdc + BigInt(owed), 'the payer got the rest of its escrow, once');
  const after = (await channelOf(h, r.payer))!;
  assert.deepEqual(await refundsOf(h, after.channel_id), [[owed, r.transaction.toLowerCase()]], 'one refund transfer, its transaction named');
  assert.equal(after.refunded_usdc, owed, 'refunded_usdc counts it once');
  const audit = await auditChannelsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network) as PublicClient);
  assert.deepEqual(audit.problems, [], 'ledger-check --chain: the books equal the contract');
  await assertLedgerConsistent(h.gw.services.storage.db);
}
