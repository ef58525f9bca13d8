import assert from 'node:assert/strict';
import type { PaymentRequirements } from '@x402/core/types';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { CHAT_BODY, channelOf, channelOffersOf, channelPayer, paid } from './channel-harness.ts';
import { reader } from './claims-setup.ts';

/** A batch-settlement deposit payload as the stock client builds it. */
export interface DepositPayload {
  type: 'deposit';
  channelConfig: Record<string, unknown>;
  voucher: { channelId: `0x${string}`; maxClaimableAmount: string; signature: `0x${string}` };
  deposit: { amount: string; authorization: Record<string, unknown> };
}

/** The 402's batch-settlement entry for USDC. */
export async function usdcChannelOffer(h: PayPerRequestHarness): Promise<PaymentRequirements> {
  const asked = await h.chat(CHAT_BODY);
  return channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase()) as PaymentRequirements;
}

/** A new payer's first channel payment (the stock client's deposit payload), sent once while the provider fails: its deposit landed, nothing charged. */
export async function landedButUnserved(h: PayPerRequestHarness) {
  const account = await h.payer(10n);
  const offer = await usdcChannelOffer(h);
  const deposit = (await channelPayer(h, account).scheme.createPaymentPayload(2, offer)).payload as unknown as DepositPayload;
  const header = v2Header(offer, deposit);
  h.fake.behaviour = { failStatus: 500 };
  try {
    assert.ok((await paid(h, header)).status >= 500);
  } finally {
    h.fake.behaviour = {};
  }
  const row = (await channelOf(h, account))!;
  assert.equal(row.charged_usdc, 0, 'the failed request charged nothing');
  return { account, offer, deposit, header, row, channelId: deposit.voucher.channelId };
}

/** One deposit recorded for the channel, the contract's balance mirrored, charged within it, and the ledger consistent. */
export async function mirroredOnce(h: PayPerRequestHarness, channelId: `0x${string}`) {
  const db = h.gw.services.storage.db;
  const deposits = await db.selectFrom('channel_transfers').select('amount_usdc').where('channel_id', '=', channelId).where('kind', '=', 'deposit').execute();
  assert.equal(deposits.length, 1, 'one deposit recorded');
  const chain = await readOnchainChannel(reader(h), channelId);
  const row = (await db.selectFrom('channels').select(['balance_usdc', 'charged_usdc']).where('channel_id', '=', channelId).executeTakeFirst())!;
  assert.equal(Number(row.balance_usdc), Number(chain.balance), 'the mirror equals the chain');
  assert.ok(Number(row.charged_usdc) <= Number(chain.balance), 'charged within what the channel holds');
  await assertLedgerConsistent(db);
}
