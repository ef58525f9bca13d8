import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';
import { strayHoldWalletEntries, type HoldWallets } from './hold-wallet-check.ts';

/**
 * The x402 batch-settlement channels against the ledger (docs/DECISIONS.md, "Batch-settlement
 * channels in the ledger"). A channel is escrow its payer still owns: the ledger holds only each
 * request's ceiling, on the channel's hold wallet `<channel id>#channel`, while the request runs
 * (ledger/operations/channel-hold.ts). Per channel:
 * - every committed request held once and released once: Σ(hold − release) over them equals what
 *   the channel has been charged since the gateway first saw it (charged − baseline), which is
 *   also what its requests' charges took from the hold wallet;
 * - the hold wallet is at 0 unless a request is pending, and then holds at most its ceiling, with
 *   exactly that request's hold unreleased;
 * - charged ≤ the latest signed voucher (nothing is charged without the payer's signature for it),
 *   and a channel with no signed voucher has charged nothing;
 * - claimed ≤ charged (a claim never takes more than was served) and claimed ≤ balance (the
 *   contract's own rule, as mirrored);
 * and, as findings: charges the chain can no longer pay (charged above the mirrored balance, after
 * a withdrawal) and requests left pending past their lease.
 */

const WALLET = sql`c.channel_id || ${sql.lit('#channel')}`;
const OF_CHANNEL = sql`e.wallet = ${WALLET}`;

/** `afterEntryId`: the incremental check's checkpoint; the per-entry rules of the hold wallets are checked on the entries after it only. */
export async function channelProblems(db: Kysely<Database>, now = Date.now(), afterEntryId = 0): Promise<{ problems: string[]; findings: string[] }> {
  const problems: string[] = [];
  const findings: string[] = [];
  const rows = await db
    .selectFrom('channels as c')
    .select([
      'c.channel_id',
      'c.charged_usdc',
      'c.baseline_usdc',
      'c.signed_max_usdc',
      'c.signature',
      'c.balance_usdc',
      'c.total_claimed_usdc',
      'c.pending_request',
      'c.pending_hold_usdc',
      'c.lease_until',
      sql<number>`coalesce((select w.balance_usdc from wallets w where w.address = ${WALLET}), 0)`.as('hold'),
      // Released requests: their holds plus their (negative) releases.
      sql<number>`coalesce((select sum(e.amount_usdc) from ledger_entries e where ${OF_CHANNEL} and e.kind in ('channel_hold', 'channel_release')
        and exists (select 1 from ledger_entries r where r.wallet = e.wallet and r.kind = 'channel_release' and r.reference = e.reference)), 0)`.as('kept'),
      sql<number>`(select count(*) from ledger_entries e where ${OF_CHANNEL} and e.kind = 'channel_hold')`.as('holds'),
      sql<number>`(select count(*) from ledger_entries e where ${OF_CHANNEL} and e.kind = 'channel_release')`.as('releases'),
      sql<string | null>`(select min(e.reference) from ledger_entries e where ${OF_CHANNEL} and e.kind = 'channel_hold'
        and not exists (select 1 from ledger_entries r where r.wallet = e.wallet and r.kind = 'channel_release' and r.reference = e.reference))`.as(
        'open_hold',
      ),
      sql<number>`coalesce((select -sum(e.amount_usdc) from ledger_entries e where ${OF_CHANNEL} and e.kind = 'charge'), 0)`.as('charges'),
    ])
    .execute();
  for (const c of rows) {
    const id = c.channel_id;
    const charged = Number(c.charged_usdc);
    const sinceSeen = charged - Number(c.baseline_usdc);
    const kept = Number(c.kept);
    const hold = Number(c.hold);
    const pending = c.pending_request;
    if (kept !== sinceSeen)
      problems.push(`channel ${id}: its requests kept ${kept} micro-USDC of their holds, but it was charged ${sinceSeen} since first seen`);
    const expectedOpen = pending === null ? 0 : 1;
    if (Number(c.holds) - Number(c.releases) !== expectedOpen) {
      problems.push(`channel ${id}: ${c.holds} holds and ${c.releases} releases with ${pending === null ? 'no request' : `request ${pending}`} pending`);
    }
    if (pending === null) {
      if (hold !== 0) problems.push(`channel ${id}: its hold wallet holds ${hold} micro-USDC with no request pending`);
      if (Number(c.charges) !== sinceSeen) problems.push(`channel ${id}: its requests were charged ${c.charges}, but the channel records ${sinceSeen}`);
    } else {
      if (c.open_hold !== `channel-request:${pending}`)
        problems.push(`channel ${id}: the unreleased hold is ${c.open_hold ?? 'none'}, not pending request ${pending}'s`);
      if (hold < 0 || hold > Number(c.pending_hold_usdc)) problems.push(`channel ${id}: its hold wallet holds ${hold}, outside 0..${c.pending_hold_usdc}`);
      if (c.lease_until !== null && Number(c.lease_until) < now) {
        findings.push(`channel ${id}: request ${pending} pending past its lease; the channel's next request commits it once its bill is final`);
      }
    }
    const signed = c.signed_max_usdc === null ? null : Number(c.signed_max_usdc);
    if (signed === null || c.signature === null) {
      if (sinceSeen !== 0) problems.push(`channel ${id}: charged ${sinceSeen} since first seen with no signed voucher`);
    } else if (charged > signed) problems.push(`channel ${id}: charged ${charged} above its latest signed voucher of ${signed}`);
    const claimed = Number(c.total_claimed_usdc);
    const balance = Number(c.balance_usdc);
    if (claimed > charged) problems.push(`channel ${id}: ${claimed} claimed on chain, more than the ${charged} charged`);
    if (claimed > balance) problems.push(`channel ${id}: ${claimed} claimed, above its balance of ${balance}`);
    if (charged > balance)
      findings.push(`channel ${id}: charged ${charged} but the channel holds ${balance}: ${charged - balance} micro-USDC served can no longer be claimed`);
  }
  problems.push(...(await strayHoldWalletEntries(db, CHANNEL_HOLDS, afterEntryId)));
  return { problems, findings };
}

/** Hold and release entries outside any channel's hold wallet, and money into or out of one other than by its requests. */
const CHANNEL_HOLDS: HoldWallets = {
  suffix: '#channel',
  kinds: ['channel_hold', 'channel_release'],
  owned: sql<boolean>`exists (select 1 from channels c where ${WALLET} = e.wallet)`,
  credit: sql<boolean>`e.kind = 'channel_hold'`,
  debit: sql<boolean>`e.kind in ('charge', 'channel_release')`,
  names: { entries: 'channel hold or release', ownerWallet: "channel's hold wallet", holdWallet: 'a channel hold wallet' },
};
