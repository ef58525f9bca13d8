import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { Database } from '../storage/schema.ts';

/**
 * The hold wallets' kind of ledger-check, shared by the upto holds (`<payer>#upto`, upto-check.ts)
 * and the channel holds (`<channel id>#channel`, channel-check.ts): a hold wallet's money is its
 * owner's (a payment's, a channel's) while a request runs, so any entry of the hold's own kinds
 * outside an owner's hold wallet, and any money moved into or out of a hold wallet by anything but
 * the hold's own operations and its requests' charges, is money no owner accounts for.
 */
export interface HoldWallets {
  /** What every hold wallet's address ends with: `#upto`, `#channel`. */
  suffix: string;
  /** The hold's own entry kinds (a hold and a release). */
  kinds: Array<'upto_hold' | 'upto_release' | 'channel_hold' | 'channel_release'>;
  /** Of an entry `e` of those kinds: it is in the hold wallet of the owner it names. */
  owned: RawBuilder<boolean>;
  /** Of an entry `e` into a hold wallet: a credit allowed there (a hold). */
  credit: RawBuilder<boolean>;
  /** Of an entry `e` out of a hold wallet: a debit allowed there (a request's charge, a release). */
  debit: RawBuilder<boolean>;
  /** How the problem lines name things: the entries (`upto hold or release`), the owner's wallet, a hold wallet. */
  names: { entries: string; ownerWallet: string; holdWallet: string };
}

/**
 * One problem line per kind of stray entry found (none when all is well). `afterEntryId`: the
 * incremental check's checkpoint; money into or out of a hold wallet is checked on the entries
 * after it only (a pattern on the wallet matches no index: without the id range this reads every
 * entry ever made).
 */
export async function strayHoldWalletEntries(db: Kysely<Database>, h: HoldWallets, afterEntryId = 0): Promise<string[]> {
  const stray = await countEntries(db, sql<boolean>`e.kind in (${sql.join(h.kinds)}) and ${not(h.owned)}`);
  const inHold = sql<boolean>`e.id > ${afterEntryId} and e.wallet like ${`%${h.suffix}`}`;
  const credited = await countEntries(db, sql<boolean>`${inHold} and e.amount_usdc > 0 and ${not(h.credit)}`);
  const debited = await countEntries(db, sql<boolean>`${inHold} and e.amount_usdc < 0 and ${not(h.debit)}`);
  const problems: string[] = [];
  if (stray > 0) problems.push(`${stray} ${h.names.entries} entries belong to no ${h.names.ownerWallet}`);
  if (credited > 0) problems.push(`${credited} credits entered ${h.names.holdWallet} other than by a hold`);
  if (debited > 0) problems.push(`${debited} debits left ${h.names.holdWallet} other than by a request's charge or a release`);
  return problems;
}

/**
 * An allowance that is not known to hold counts as broken: a rule reading a NULL column (an
 * adjustment with no reference, tested against `upto-release:%`) is NULL in SQL, and `not NULL`
 * would let that entry pass unseen.
 */
const not = (allowed: RawBuilder<boolean>) => sql<boolean>`not coalesce((${allowed}), false)`;

async function countEntries(db: Kysely<Database>, which: RawBuilder<boolean>): Promise<number> {
  const row = await db.selectFrom('ledger_entries as e').select(sql<number>`count(*)`.as('n')).where(which).executeTakeFirstOrThrow();
  return Number(row.n);
}
