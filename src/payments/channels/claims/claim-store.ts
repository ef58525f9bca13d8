import type { Kysely } from 'kysely';
import type { Database } from '../../../storage/schema.ts';
import { findChannel, type ChannelRow } from '../channel-store.ts';

/**
 * The background claimer's reads of the channel table (beside channel-store.ts, whose listUnclaimed,
 * markClaimed and recordTransfer it writes with).
 */

/**
 * When each of `channelIds` last had a claim recorded (its newest `claim` transfer), else when the
 * gateway first saw it: the age of its oldest unclaimed charge is at most now minus this.
 */
export async function unclaimedSince(db: Kysely<Database>, channelIds: string[]): Promise<Map<string, number>> {
  const since = new Map<string, number>();
  // In slices: both engines bound the number of parameters of one statement.
  for (let i = 0; i < channelIds.length; i += 500) {
    const slice = channelIds.slice(i, i + 500);
    const rows = await db
      .selectFrom('channels as c')
      .select(['c.channel_id', 'c.created_at'])
      .select((eb) =>
        eb
          .selectFrom('channel_transfers as t')
          .select((t) => t.fn.max('t.created_at').as('at'))
          .whereRef('t.channel_id', '=', 'c.channel_id')
          .where('t.kind', '=', 'claim')
          .as('last_claim'),
      )
      .where('c.channel_id', 'in', slice)
      .execute();
    for (const r of rows) since.set(r.channel_id, Number(r.last_claim ?? r.created_at));
  }
  return since;
}

/** Channels held for a cooperative refund whose receipt was not seen yet (refund-in-flight.ts). */
export async function channelsHeldForRefunds(db: Kysely<Database>, limit = 100): Promise<ChannelRow[]> {
  const rows = await db.selectFrom('channels').select('channel_id').where('lease_owner', 'like', 'refund-tx:%').orderBy('lease_until').limit(limit).execute();
  const held: ChannelRow[] = [];
  for (const r of rows) {
    const row = await findChannel(db, r.channel_id);
    if (row) held.push(row);
  }
  return held;
}

/** The receivers and tokens channels pay (one per token for a gateway with one payTo): what a settle sweeps. */
export async function channelReceivers(db: Kysely<Database>): Promise<Array<{ network: string; receiver: string; token: string }>> {
  return db.selectFrom('channels').select(['network', 'receiver', 'token']).distinct().execute();
}

/** A settle sweeps one receiver's claims over all its channels in `token`: it is recorded once, under this key in place of a channel id. */
export const settleTransferKey = (receiver: string, token: string) => `settle:${receiver.toLowerCase()}:${token.toLowerCase()}`;

export interface ChannelListing {
  channel_id: string;
  network: string;
  payer: string;
  token: string;
  charged_usdc: number;
  total_claimed_usdc: number;
  balance_usdc: number;
  deposited_usdc: number;
  refunded_usdc: number;
  withdraw_requested_at: number;
  withdraw_delay: number;
  last_request_at: number | null;
}

/** Channels for `tollgate admin channels`, the most unclaimed first. */
export async function listChannels(db: Kysely<Database>, limit: number): Promise<ChannelListing[]> {
  const rows = await db
    .selectFrom('channels')
    .select([
      'channel_id',
      'network',
      'payer',
      'token',
      'charged_usdc',
      'total_claimed_usdc',
      'balance_usdc',
      'deposited_usdc',
      'refunded_usdc',
      'withdraw_requested_at',
      'withdraw_delay',
      'last_request_at',
    ])
    .orderBy((eb) => eb('charged_usdc', '-', eb.ref('total_claimed_usdc')), 'desc')
    .orderBy('channel_id')
    .limit(limit)
    .execute();
  return rows.map((r) => ({
    ...r,
    charged_usdc: Number(r.charged_usdc),
    total_claimed_usdc: Number(r.total_claimed_usdc),
    balance_usdc: Number(r.balance_usdc),
    deposited_usdc: Number(r.deposited_usdc),
    refunded_usdc: Number(r.refunded_usdc),
    withdraw_requested_at: Number(r.withdraw_requested_at),
    withdraw_delay: Number(r.withdraw_delay),
    last_request_at: r.last_request_at === null ? null : Number(r.last_request_at),
  }));
}
