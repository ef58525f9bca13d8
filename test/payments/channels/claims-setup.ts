import assert from 'node:assert/strict';
import type { Abi, Hex, PublicClient } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { configOf, findChannel, type ChannelRow } from '../../../src/payments/channels/channel-store.ts';
import { CLAIM_LEASE, runClaimPass, type ClaimDeps } from '../../../src/payments/channels/claims/claim-pass.ts';
import { namedLease } from '../../../src/retention/job-lease.ts';
import { batchSettlementAddress, readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { CHANNEL_CONFIG, CHAT_BODY, channelOf, channelPayer, channelSuite } from './channel-harness.ts';
import type { Engine } from '../../../src/storage/database.ts';

/**
 * The background claimer driven by hand against a running gateway of the channel suite: its
 * facilitator, chain readers and database, the pass run when the test says (the gateway's own job
 * waits claimIntervalSeconds, longer than any of these tests).
 */
export const HOLDER = 'claims-test';

/**
 * The channel suite with the gateway's own claimer at its longest period (300 s), so that it never
 * takes the lease from under a test's pass.
 */
export function claimsSuite(engine: Engine) {
  const { payPerRequest } = CHANNEL_CONFIG;
  return channelSuite(engine, { payPerRequest: { ...payPerRequest, batchSettlement: { ...payPerRequest.batchSettlement, claimIntervalSeconds: 300 } } });
}
const quiet = { info: () => {}, warn: () => {} };

export function claimDeps(h: PayPerRequestHarness, over: Partial<ClaimDeps> = {}): ClaimDeps {
  const { services } = h.gw;
  const topup = services.topup!;
  return {
    db: services.storage.db,
    lease: namedLease(services.storage.db, CLAIM_LEASE),
    facilitator: topup.facilitator,
    clientFor: (network) => topup.clientFor(network),
    config: services.config.payPerRequest.batchSettlement,
    logger: quiet,
    now: Date.now,
    ...over,
  };
}

export const claimPass = (h: PayPerRequestHarness, over: Partial<ClaimDeps> = {}, force = false) => runClaimPass(claimDeps(h, over), { holder: HOLDER, force });

/** A payer with a channel on which `requests` chat requests were served; its row after them. */
export async function servedChannel(h: PayPerRequestHarness, requests = 2): Promise<{ account: FundedAccount; row: ChannelRow; chat: () => Promise<void> }> {
  const account = await h.payer(10n);
  const payer = channelPayer(h, account);
  const chat = async () => {
    await payer.openai.chat.completions.create({ ...CHAT_BODY, messages: [{ role: 'user', content: 'claim me' }] });
  };
  for (let i = 0; i < requests; i++) await chat();
  const row = (await channelOf(h, account))!;
  assert.ok(row.charged_usdc > 0);
  return { account, row, chat };
}

export const reader = (h: PayPerRequestHarness) => h.gw.services.topup!.clientFor(h.chain.network) as PublicClient;

/** Every channel's mirrored balance and totalClaimed equal the contract's, and each is claimed up to what it was charged. */
export async function assertClaimedAsCharged(h: PayPerRequestHarness, channelIds: string[]): Promise<void> {
  for (const id of channelIds) {
    const row = (await findChannel(h.gw.services.storage.db, id))!;
    const chain = await readOnchainChannel(reader(h), id as Hex);
    assert.equal(Number(chain.totalClaimed), row.charged_usdc, `channel ${id}: everything charged is claimed on chain`);
    assert.equal(row.total_claimed_usdc, Number(chain.totalClaimed), `channel ${id}: the mirror equals the chain's totalClaimed`);
    assert.equal(row.balance_usdc, Number(chain.balance), `channel ${id}: the mirror equals the chain's balance`);
  }
}

/** The payer calls the contract itself (initiateWithdraw, finalizeWithdraw): the escape hatch no gateway takes part in. */
export async function payerCalls(h: PayPerRequestHarness, account: FundedAccount, row: ChannelRow, functionName: string, args: unknown[] = []) {
  const client = h.chain.client(account);
  const hash = await client.writeContract({
    address: batchSettlementAddress,
    abi: artifacts.StandInBatchSettlement.abi as Abi,
    functionName,
    args: [configOf(row), ...args],
  });
  const receipt = await client.waitForTransactionReceipt({ hash });
  assert.equal(receipt.status, 'success', `${functionName} was mined`);
}

export const gasOf = async (h: PayPerRequestHarness, hash: string) => (await reader(h).getTransactionReceipt({ hash: hash as Hex })).gasUsed;
