import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import OpenAI from 'openai';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import type { Engine } from '../../../src/storage/database.ts';
import { payPerRequestSuite, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

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
