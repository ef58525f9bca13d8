import assert from 'node:assert/strict';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme, computeChannelId, signVoucher } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import OpenAI from 'openai';
import type { privateKeyToAccount } from 'viem/accounts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import type { Engine } from '../../../src/storage/database.ts';
import { call } from '../../support/gateway.ts';
import { payPerRequestSuite, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';

/**
 * Pay-per-request with x402 `batch-settlement` channels on (payPerRequest.batchSettlement), paid by
 * the stock clients: `@x402/fetch` with `new x402Client().register('eip155:*', new
 * BatchSettlementEvmScheme(signer))` (the signer reads the channel from the dev chain, as a wallet
 * does), under the stock `openai` SDK. The client is told the dev chain's USDC, the EIP-3009 offer.
 */
export const CHANNEL_CONFIG = { payPerRequest: { enabled: true, batchSettlement: { enabled: true, withdrawDelaySeconds: 900, minDepositUsd: 1 } } };

export function channelSuite(engine: Engine, config: Record<string, unknown> = {}): () => PayPerRequestHarness {
  return payPerRequestSuite(engine, { config: { ...CHANNEL_CONFIG, ...config } });
}

/** A payer's stock batch-settlement client: one channel, its local state kept in memory as the package does by default. */
export interface ChannelPayer {
  account: FundedAccount;
  client: x402Client;
  scheme: BatchSettlementEvmScheme;
  fetch: typeof fetch;
  openai: OpenAI;
}

export function channelPayer(h: PayPerRequestHarness, account: FundedAccount): ChannelPayer {
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(account, h.chain.client(account)));
  const usdcChannel = (_version: number, accepts: PaymentRequirements[]) =>
    accepts.find((r) => r.scheme === 'batch-settlement' && r.asset.toLowerCase() === h.chain.usdc.toLowerCase()) ?? accepts[0]!;
  const client = new x402Client(usdcChannel).register('eip155:*', scheme);
  client.setSpendControls({
    maxAmountPerPayment: '$100',
    allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '100000000' }],
  });
  const paying = wrapFetchWithPayment(fetch, client) as typeof fetch;
  const openai = new OpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: 'unused', defaultHeaders: { Authorization: null }, fetch: paying, maxRetries: 0 });
  return { account, client, scheme, fetch: paying, openai };
}

export const channelOffersOf = (accepts: PaymentRequirements[]) => accepts.filter((r) => r.scheme === 'batch-settlement');

/** The gateway's record of `payer`'s channel (the one channel its stock client opened). */
export async function channelOf(h: PayPerRequestHarness, payer: FundedAccount) {
  const row = await h.gw.services.storage.db.selectFrom('channels').select('channel_id').where('payer', '=', payer.address.toLowerCase()).executeTakeFirst();
  return row ? findChannel(h.gw.services.storage.db, row.channel_id) : undefined;
}

/** The charges of `payer`'s channel requests, as their usage rows record them, oldest first. */
export async function channelCharges(h: PayPerRequestHarness, channelId: string): Promise<number[]> {
  const rows = await h.gw.services.storage.db
    .selectFrom('request_usage')
    .select(['charged_usdc'])
    .where('wallet', '=', `${channelId}#channel`)
    .orderBy('created_at')
    .execute();
  return rows.map((r) => Number(r.charged_usdc));
}

export const CHAT_BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

export interface Signed {
  header: string;
  offer: PaymentRequirements;
  channelId: `0x${string}`;
  ceiling: number;
}

/** A voucher payload for `payer`'s channel (or `over` it) adding to `maxClaimable`, signed by `signer` (the payer by default). */
export async function voucherHeader(
  h: PayPerRequestHarness,
  payer: FundedAccount,
  maxClaimable: (ceiling: number, charged: number) => number,
  over: { signer?: FundedAccount | ReturnType<typeof privateKeyToAccount>; salt?: `0x${string}` } = {},
): Promise<Signed> {
  const asked = await h.chat(CHAT_BODY);
  const offer = channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
  const config = channelPayer(h, payer).scheme.buildChannelConfig(offer);
  const channelId = computeChannelId(config, offer.network);
  const signedFor = over.salt ? computeChannelId({ ...config, salt: over.salt }, offer.network) : channelId;
  const charged = (await channelOf(h, payer))?.charged_usdc ?? 0;
  const ceiling = Number(offer.amount);
  const voucher = await signVoucher(toClientEvmSigner(over.signer ?? payer), signedFor, String(maxClaimable(ceiling, charged)), offer.network);
  return { header: v2Header(offer, { type: 'voucher', channelConfig: config, voucher }), offer, channelId, ceiling };
}

/** A payer whose channel the stock client opened with a deposit and one request. */
export async function openedChannel(h: PayPerRequestHarness): Promise<FundedAccount> {
  const account = await h.payer(10n);
  const { data } = await channelPayer(h, account).openai.chat.completions.create(CHAT_BODY).withResponse();
  assert.ok(data.choices[0]);
  return account;
}

export const paid = (h: PayPerRequestHarness, header: string, url = h.gw.url) =>
  call(url, 'POST', '/v1/chat/completions', CHAT_BODY, { 'payment-signature': header });
