import type { Kysely } from 'kysely';
import { toIso, type KeyRow } from '../keys/api-keys.ts';
import { getBalance } from '../ledger/balances.ts';
import type { ReserveOutcome } from '../ledger/operations/reserve.ts';
import { ApiError } from '../refusal.ts';
import type { Database } from '../storage/schema.ts';
import type { BilledPlan } from './bill.ts';
import type { ChatPlan } from './plan/plan.ts';
import { shortfallOf } from './shortfall.ts';

/** A reservation the ledger refused: the wallet's available balance or the key's spend limit could not cover it. */
export type RefusedReservation = Exclude<ReserveOutcome, { ok: true }>;

const PERIOD_WORDS = { total: 'total', day: 'daily (UTC)', month: 'monthly (UTC)' } as const;

/** Seconds a 402 caused only by the wallet's own requests in flight asks the client to wait. */
export const IN_FLIGHT_RETRY_AFTER_SECONDS = 1;

/**
 * The error for a reservation that was refused, before anything went upstream. `shrink`: how the
 * request can reserve less (chat: lower max_tokens; embeddings: fewer or shorter inputs).
 */
export async function reservationRefusal(
  db: Kysely<Database>,
  key: KeyRow,
  plan: Pick<BilledPlan, 'reservationUsdc'>,
  outcome: RefusedReservation,
  shrink = 'lower max_tokens',
): Promise<ApiError> {
  const required = plan.reservationUsdc;
  if (outcome.refused === 'key_limit') {
    const resets = outcome.resetsAt === null ? 'a total limit does not reset' : `it resets at ${toIso(outcome.resetsAt)}`;
    return new ApiError(
      402,
      'KEY_LIMIT_EXCEEDED',
      `this API key's ${PERIOD_WORDS[outcome.period]} spend limit of ${outcome.limitUsdc} micro-USDC is reached: ${outcome.spentUsdc} spent and ${outcome.lockedUsdc} reserved by requests in flight, ` +
        `and this request reserves ${required}; ${resets}. ${shrink[0]!.toUpperCase()}${shrink.slice(1)}, or ask the wallet owner to raise the limit (PATCH /v1/auth/keys/${key.id})`,
      {
        limit_usdc: outcome.limitUsdc,
        spent_usdc: outcome.spentUsdc,
        reserved_usdc: outcome.lockedUsdc,
        required_usdc: required,
        period: outcome.period,
        resets_at: toIso(outcome.resetsAt),
      },
    );
  }
  const balance = await getBalance(db, key.wallet);
  // The balance covers the request and only the wallet's own requests in flight hold it: the same
  // request succeeds once they settle, so the 402 asks for a retry (Retry-After) rather than saying
  // x-should-retry: false (src/http/errors.ts). Its message still names POST /v1/topup, as every
  // INSUFFICIENT_BALANCE does (spec section 7): a top-up is the other way to run now.
  const inFlight = Number(balance.balance_usdc) >= required;
  return new ApiError(
    402,
    'INSUFFICIENT_BALANCE',
    inFlight
      ? `available balance ${balance.available_usdc} micro-USDC cannot cover this request's reserved cost of ${required} while this wallet's requests in flight hold ${balance.locked_usdc}; retry when they finish, top up with POST /v1/topup, or ${shrink}`
      : `available balance ${balance.available_usdc} micro-USDC cannot cover this request's reserved cost of ${required}; top up with POST /v1/topup, or ${shrink}`,
    { balance_usdc: balance.balance_usdc, available_usdc: balance.available_usdc, required_usdc: required },
    inFlight ? { 'retry-after': String(IN_FLIGHT_RETRY_AFTER_SECONDS) } : {},
  );
}

/** The 402 for a chat reservation, with the figures of shortfall.ts in its message and fields. */
export async function balanceRefusal(db: Kysely<Database>, key: KeyRow, plan: ChatPlan, outcome: RefusedReservation): Promise<ApiError> {
  const refusal = await reservationRefusal(db, key, plan, outcome);
  const shortfall = shortfallOf(plan, await coverable(db, key, outcome));
  refusal.message += shortfall.text;
  Object.assign(refusal.extra, shortfall.fields);
  return refusal;
}

/** What the refused reservation could have had: the wallet's available balance, or the key's remaining limit. */
export async function coverable(db: Kysely<Database>, key: KeyRow, outcome: RefusedReservation): Promise<number> {
  if (outcome.refused === 'key_limit') return Math.max(0, outcome.limitUsdc - outcome.spentUsdc - outcome.lockedUsdc);
  return Math.max(0, (await getBalance(db, key.wallet)).available_usdc);
}
