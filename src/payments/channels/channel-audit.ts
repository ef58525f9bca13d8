import type { Kysely } from 'kysely';
import type { PublicClient } from 'viem';
import type { Database } from '../../storage/schema.ts';
import { readOnchainChannel } from './onchain-channel.ts';

/**
 * `ledger-check --chain` for batch-settlement channels: each channel's mirrored on-chain fields
 * against x402BatchSettlement, all read at one block. The claimed total must be what the contract
 * holds and never above what the gateway charged (the gateway is the only claimer of its channels,
 * so any difference is a claim it did not record, or one it recorded that did not land). A balance,
 * withdrawal or refund nonce that differs is a mirror not refreshed since the payer acted on chain
 * directly (a top-up, a timed withdrawal): named too, since a pending withdrawal the gateway has not
 * seen is time running out on its unclaimed charges.
 */
export async function auditChannelsOnChain(
  db: Kysely<Database>,
  clientFor: (network: string) => PublicClient | undefined,
): Promise<{ checked: number; skipped: number; problems: string[] }> {
  const audit = { checked: 0, skipped: 0, problems: [] as string[] };
  const rows = await db.selectFrom('channels').selectAll().orderBy('created_at').execute();
  for (const c of rows) {
    const client = clientFor(c.network);
    if (!client) {
      audit.skipped++;
      continue;
    }
    audit.checked++;
    let chain;
    try {
      chain = await readOnchainChannel(client, c.channel_id as `0x${string}`);
    } catch (err) {
      audit.problems.push(`channel ${c.channel_id}: could not read it on ${c.network} (${(err as Error).name})`);
      continue;
    }
    const id = c.channel_id;
    if (chain.totalClaimed > BigInt(c.charged_usdc))
      audit.problems.push(`channel ${id}: ${chain.totalClaimed} claimed on chain, above the ${c.charged_usdc} charged`);
    if (chain.totalClaimed !== BigInt(c.total_claimed_usdc))
      audit.problems.push(`channel ${id}: ${chain.totalClaimed} claimed on chain, ${c.total_claimed_usdc} mirrored`);
    if (chain.balance !== BigInt(c.balance_usdc)) audit.problems.push(`channel ${id}: balance ${chain.balance} on chain, ${c.balance_usdc} mirrored`);
    if (chain.withdrawRequestedAt !== Number(c.withdraw_requested_at)) {
      audit.problems.push(`channel ${id}: withdrawal requested at ${chain.withdrawRequestedAt} on chain, ${c.withdraw_requested_at} mirrored`);
    }
    if (chain.refundNonce.toString() !== c.refund_nonce)
      audit.problems.push(`channel ${id}: refund nonce ${chain.refundNonce} on chain, ${c.refund_nonce} mirrored`);
  }
  return audit;
}
