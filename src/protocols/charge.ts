/**
 * What a request cost the caller, as the final usage of every protocol reports it (JSON answers and
 * streams alike; a stream cannot carry `x-tollgate-charged-usdc`, whose header leaves before the
 * charge is known). Rendered here once, so that chat, Responses, Messages and embeddings all say it
 * with the same names (docs/api.md, "The charge in the answer").
 */

import { USAGE_OBJECT } from './upstream.ts';

/** What the ledger charged for one request, as the settle reported it. */
export interface Charge {
  /** Micro-USDC taken from the wallet: the same number as `x-tollgate-charged-usdc`. */
  usdc: number;
  /**
   * The database did not answer and the settle was spooled to local disk (`x-tollgate-billing:
   * deferred`): `usdc` is the charge that will be applied when it returns.
   */
  deferred: boolean;
}

/** The charge fields of a usage object. */
export interface ChargeFields {
  /** USD, as a number: OpenRouter's name and unit, which cost-tracking clients already read. */
  cost: number;
  /** The same charge, exact: integer micro-USDC (1 USD = 1,000,000), as every Tollgate amount. */
  charged_usdc: number;
  /** Present (true) only when the billing was deferred through a database outage. */
  charge_deferred?: true;
}

/** Names a provider (or a gateway in front of us) may have written into its usage, which we replace. */
const OURS = ['cost', 'charged_usdc', 'charge_deferred', 'cost_details'] as const;

/**
 * The charge of a finished settle, or undefined when the settle was not applied (the reservation was
 * finished by someone else): such a request must not claim a charge. Structural, so that callers
 * outside chat/ (embeddings) pass the ledger's SettleOutcome as it is.
 */
export function chargeOf(outcome: { applied: boolean; chargedUsdc: number; deferred?: boolean }): Charge | undefined {
  return outcome.applied ? { usdc: outcome.chargedUsdc, deferred: outcome.deferred === true } : undefined;
}

/**
 * The fields to add to a usage object for `charge`; none when there is no charge to claim. USD is
 * the micro-USDC amount divided by 10^6, whose shortest JSON form is the exact decimal for any
 * amount below 10^15 micro-USDC.
 */
export function chargeFields(charge: Charge | undefined): ChargeFields | Record<string, never> {
  if (!charge) return {};
  const fields: ChargeFields = { cost: charge.usdc / 1_000_000, charged_usdc: charge.usdc };
  if (charge.deferred) fields.charge_deferred = true;
  return fields;
}

/**
 * Whether an event's text may hold one of the charge names, checked on the text so that content
 * events (the hot path) are not parsed; generated text matches only by accident, and then costs
 * one parse. Any `\u` escape counts as a match: a key written `"\u0063harged_usdc"` is
 * `charged_usdc` once parsed, and the text cannot tell which escapes are in keys (providers that
 * escape all non-ASCII text pay one parse per such event).
 */
export const mayNameACharge = (text: string) => text.includes('"cost') || text.includes('"charge') || text.includes('\\u');

/** Whether a usage object holds one of the names the charge is written under. */
export function namesACharge(usage: object): boolean {
  return OURS.some((name) => name in usage);
}

/**
 * `usage` with the charge fields, after removing any the provider wrote under the same names (its
 * own `cost` is what the operator pays, never what the caller was charged, and a lying provider
 * must not be able to state a charge): without a charge, the usage carries none.
 */
export function withCharge<T extends object>(usage: T, charge: Charge | undefined): T & Partial<ChargeFields> {
  const out: Record<string, unknown> = { ...(usage as Record<string, unknown>) };
  for (const name of OURS) delete out[name];
  return Object.assign(out, chargeFields(charge)) as T & Partial<ChargeFields>;
}

/**
 * A provider's JSON answer with the charge fields written into its one usage object as text,
 * without parsing and re-serialising the answer (which cost 17 µs for a 2 KB answer and 0.5 ms for
 * 200 KB, on the hot path of every JSON answer). Null when that is not certain to be right: a
 * usage object that is not the only one, or a charge name already in the text (its own `cost`,
 * which must be removed), or any `\u` escape, which may spell one of them or `usage` itself; the
 * caller then re-serialises. Safe because a JSON string cannot hold `"usage"` unescaped, so the one
 * occurrence followed by `:` and `{` is the usage object's key.
 */
export function spliceCharge(answerJson: string, charge: Charge): string | null {
  if (mayNameACharge(answerJson)) return null;
  // `"usage"` as text is a key or a whole string value ("usage"), never part of a longer string.
  const first = answerJson.indexOf('"usage"');
  if (first < 0 || first !== answerJson.lastIndexOf('"usage"')) return null;
  const opens = new RegExp(USAGE_OBJECT.source, 'y');
  opens.lastIndex = first;
  if (!opens.test(answerJson)) return null;
  const at = opens.lastIndex;
  const closes = /\s*\}/y;
  closes.lastIndex = at;
  const fields = JSON.stringify(chargeFields(charge)).slice(1, -1);
  return `${answerJson.slice(0, at)}${fields}${closes.test(answerJson) ? '' : ','}${answerJson.slice(at)}`;
}
