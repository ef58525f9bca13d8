import type { Operands } from './statement.ts';

/**
 * The wallet row's money: `locked_usdc` (reserved by requests in flight) and `balance_usdc`. The
 * database CHECKs keep locked ≤ balance and neither negative, whatever a caller computed.
 */

export type Locking = Operands<'amount' | 'at' | 'wallet'>;

/**
 * Locks `amount` if the wallet's available balance covers it: one conditional UPDATE decides, so
 * concurrent reservations can never lock more than the balance. It also takes the wallet's row
 * lock, which every writer of the key's buckets holds. `andAlso`: a further condition of the
 * one-statement reserve.
 */
export const lockFunds = (v: Locking, andAlso = ''): string =>
  `UPDATE wallets SET locked_usdc = locked_usdc + ${v.amount}, updated_at = ${v.at} WHERE address = ${v.wallet} AND balance_usdc - locked_usdc >= ${v.amount}${andAlso}`;

export type Release = Operands<'released' | 'charged' | 'at' | 'wallet'>;

/**
 * Releases a reservation's lock and takes its charge: a settle passes both, a void or the sweeper
 * (or a reserve refused by its key's limit) only the release, a late charge (released earlier by
 * the sweeper) only the charge. `from`: what the finish statement reads its values from.
 */
export const releaseAndCharge = (v: Release, from = ''): string =>
  `UPDATE wallets SET locked_usdc = locked_usdc - ${v.released}, balance_usdc = balance_usdc - ${v.charged}, updated_at = ${v.at}${from} WHERE address = ${v.wallet}`;
