import type { Storage } from '../../storage/database.ts';
import { BOUND_BUCKETS, bucketValues, countReservation } from '../effects/key-spend.ts';
import { insertReservation } from '../effects/reservation.ts';
import { boundOperands, counterStatement, param, postgresStatement, selectFrom, unitStatement, VALUES } from '../effects/statement.ts';
import { lockFunds, releaseAndCharge } from '../effects/wallet.ts';
import { checkKeyLimit, type KeyLimitReached } from '../key-spend-limit.ts';
import { assertAmount, assertMoney } from '../assert.ts';

/** Reserve: the first phase (see ../reservations.ts). */
export interface ReserveRequest {
  wallet: string;
  apiKeyId: number;
  requestId: string;
  amountUsdc: number;
  leaseMs: number;
  /**
   * A hint from the (possibly seconds-old) cached key row: the key has a spend limit, so PostgreSQL
   * skips the one-statement reserve and goes straight to the statements that check it. Only a hint: the limit itself is always read
   * in the unit that reserves.
   */
  keyHasLimit?: boolean;
}

export type ReserveOutcome =
  /**
   * `keyLimited`: the key had a spend limit when this reservation was admitted under it, so its
   * charge must stay within the reservation (the limit admitted exactly that much).
   */
  { ok: true; keyLimited: boolean } | { ok: false; refused: 'balance' } | ({ ok: false; refused: 'key_limit' } & KeyLimitReached);

// The lock returns whether the key has a spend limit: on SQLite a key without one (most keys) needs
// no read of its own; a key with one has its limit and its bucket read by checkKeyLimit, after the lock.
const LOCK_FUNDS = unitStatement(
  `${lockFunds(boundOperands())} RETURNING (SELECT spend_limit_usdc FROM api_keys WHERE id = ${param('apiKeyId')}) AS key_limit`,
);
const UNLOCK_FUNDS = unitStatement(releaseAndCharge(boundOperands()));
// A counter: a batch of reserves on one key counts them in its buckets once (batch-counters.ts).
const COUNT_RESERVATION = counterStatement(countReservation(boundOperands(), BOUND_BUCKETS), ['amount']);
const INSERT_RESERVATION = unitStatement(insertReservation(VALUES, boundOperands()));

// PostgreSQL does it all in one statement (data-modifying CTEs): one round trip of its group-commit
// batch instead of four (UPDATE, INSERT, INSERT, and the key's limit read). Only for a key without a spend
// limit: checking a limit needs a read of its buckets made after the wallet lock is taken, which
// one statement's snapshot cannot give. If the key has gained a limit, nothing is reserved and
// the statements after it decide. SQLite has no DML in CTEs, and needs none: its statements
// are calls into the process, not round trips.
const RESERVE_IN_ONE_STATEMENT = postgresStatement(`WITH locked AS (
    ${lockFunds(
      { amount: param('amount'), at: param('at'), wallet: param('wallet') },
      `\n      AND NOT EXISTS (SELECT 1 FROM api_keys WHERE id = ${param('apiKeyId')} AND spend_limit_usdc IS NOT NULL)`,
    )}
    RETURNING address
  ), counted AS (
    ${countReservation(
      { apiKeyId: param('apiKeyId'), amount: param('amount') },
      { total: "'total'", day: `${param('dayBucket')}::text`, month: `${param('monthBucket')}::text` },
      'locked',
    )}
  )
  ${insertReservation(selectFrom('locked'), {
    wallet: 'address',
    apiKeyId: param('apiKeyId'),
    requestId: param('requestId'),
    amount: param('amount'),
    leaseExpiresAt: param('leaseExpiresAt'),
    at: param('at'),
  })}`);

const NO_LIMIT = { limited: false, refusal: null } as const;

/**
 * True when the wallet's available balance covered the amount and it is now locked. The promise
 * settles only after the reservation is committed, so the provider is never called on an
 * uncommitted one.
 */
export async function reserve(storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>, r: ReserveRequest, now = Date.now()): Promise<boolean> {
  return (await tryReserve(storage, r, now)).ok;
}

/**
 * Locks the amount in the wallet and counts it against the key's spend limit, in one atomic unit:
 * both hold, or nothing is reserved, and the outcome says which one refused. In-flight requests
 * count, so a limit that covers K requests admits exactly K of any number sent at once.
 */
export async function tryReserve(storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>, r: ReserveRequest, now = Date.now()): Promise<ReserveOutcome> {
  // What is locked must be a whole amount, and its lease must end: a lock that never expires is
  // money a crash holds for good.
  assertAmount('a reservation', r.amountUsdc);
  assertMoney(Number.isFinite(r.leaseMs) && r.leaseMs > 0, () => `request ${r.requestId}: a reservation's lease must be a positive time, got ${r.leaseMs}`);
  const v = {
    wallet: r.wallet,
    apiKeyId: r.apiKeyId,
    requestId: r.requestId,
    amount: r.amountUsdc,
    at: now,
    leaseExpiresAt: now + r.leaseMs,
    ...bucketValues(now),
  };
  if (storage.engine === 'postgres' && !r.keyHasLimit) {
    const reserved = await storage.writeUnit((tx) => RESERVE_IN_ONE_STATEMENT.run(tx, v), {
      wallet: r.wallet,
      oneStatement: true,
      nothingAfterStatement: true,
    });
    // Only taken by a key with no limit (the statement checks it), so nothing caps its charge.
    if (reserved === 1) return { ok: true, keyLimited: false };
    // Refused: the balance, or a limit set since the key was cached. The unit below tells which.
  }
  return storage.writeUnit(
    async (tx): Promise<ReserveOutcome> => {
      // The conditional UPDATE decides, and takes the wallet's row lock (see lockFunds).
      const locked = await LOCK_FUNDS.get<{ key_limit: unknown }>(tx, v);
      if (!locked) return { ok: false, refused: 'balance' };
      // On PostgreSQL the RETURNING read the key as of the statement's start, which may precede its wait for the
      // wallet's lock (a limit confirmed meanwhile would be missed): only SQLite's one writer may trust it.
      const noLimit = locked.key_limit === null && storage.engine === 'sqlite';
      const limit = noLimit ? NO_LIMIT : await checkKeyLimit(tx, r.apiKeyId, r.amountUsdc, now);
      if (limit.refusal) {
        await UNLOCK_FUNDS.run(tx, { released: r.amountUsdc, charged: 0, at: now, wallet: r.wallet });
        return { ok: false, refused: 'key_limit', ...limit.refusal };
      }
      await COUNT_RESERVATION.add(tx, v);
      await INSERT_RESERVATION.run(tx, v);
      return { ok: true, keyLimited: limit.limited };
    },
    { wallet: r.wallet },
  );
}
