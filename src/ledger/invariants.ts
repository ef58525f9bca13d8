import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';
import { findChargesAboveReservation } from './over-reservation.ts';
import { usageTotalsProblems } from './usage-totals-check.ts';
import { keySpendProblems } from './key-spend-audit.ts';
import { usageDailyProblems } from './usage-daily-check.ts';
import { uptoProblems } from './upto-check.ts';
import { channelProblems } from './channel-check.ts';
import { paymentStateProblems } from './payment-state-check.ts';
import { PAYMENT_STATES } from './payment-states.ts';

import { finishedReservationCharges, reservationChargeProblems } from './reservation-charges.ts';

export interface LedgerCheck {
  ok: boolean;
  wallets: number;
  entries: number;
  /** Sum of all credits ever made, in micro-USDC. */
  creditsUsdc: number;
  /** Sum of all charges ever made (a positive number), in micro-USDC. */
  chargesUsdc: number;
  problems: string[];
  /**
   * Facts that break no money invariant but need the operator's attention (see
   * findChargesAboveReservation). They do not make `ok` false.
   */
  findings: string[];
}

/**
 * Verifies the money invariants of ../shared/DESIGN.md section 4 (Money):
 * - every wallet's balance equals the sum of its ledger entries;
 * - every wallet's locked amount equals the sum of its pending reservations;
 * - no balance is negative and locked never exceeds balance;
 * - credits − charges = the sum of all balances (nothing created or lost);
 * - a finished reservation charged at most once, with exactly the amount it records;
 * - each redeem code credited at most once;
 * - each API key's spend per period (key_spend) equals its usage rows and pending reservations;
 * - each top-up payment credited at most once, only once credited, to its payer, and no top-up
 *   credit without a payment behind it (see paymentProblems);
 * - the per-key and per-day usage totals equal the usage rows they add up;
 * - each upto payment held once and, once its charge is fixed, released once (see uptoProblems).
 * - each batch-settlement channel's request holds and releases add up to its charged amount (see channelProblems).
 */
export async function checkLedger(db: Kysely<Database>): Promise<LedgerCheck> {
  const problems: string[] = [];

  const wallets = await db
    .selectFrom('wallets as w')
    .select([
      'w.address',
      'w.balance_usdc',
      'w.locked_usdc',
      sql<number>`coalesce((select sum(e.amount_usdc) from ledger_entries e where e.wallet = w.address), 0)`.as('ledger_sum'),
      sql<number>`coalesce((select sum(r.amount_usdc) from reservations r where r.wallet = w.address and r.status = 'pending'), 0)`.as('pending_sum'),
    ])
    .execute();
  let balances = 0;
  for (const w of wallets) {
    const balance = Number(w.balance_usdc);
    const locked = Number(w.locked_usdc);
    balances += balance;
    if (balance !== Number(w.ledger_sum)) problems.push(`wallet ${w.address}: balance ${balance} != ledger sum ${w.ledger_sum}`);
    if (locked !== Number(w.pending_sum)) problems.push(`wallet ${w.address}: locked ${locked} != pending reservations ${w.pending_sum}`);
    if (balance < 0) problems.push(`wallet ${w.address}: negative balance ${balance}`);
    if (locked < 0 || locked > balance) problems.push(`wallet ${w.address}: locked ${locked} outside 0..${balance}`);
  }

  const totals = await db
    .selectFrom('ledger_entries')
    .select([
      sql<number>`count(*)`.as('entries'),
      sql<number>`coalesce(sum(case when amount_usdc > 0 then amount_usdc else 0 end), 0)`.as('credits'),
      sql<number>`coalesce(sum(case when amount_usdc < 0 then -amount_usdc else 0 end), 0)`.as('charges'),
    ])
    .executeTakeFirstOrThrow();
  const credits = Number(totals.credits);
  const charges = Number(totals.charges);
  if (credits - charges !== balances) problems.push(`credits ${credits} - charges ${charges} != sum of balances ${balances}`);

  const orphanEntries = await db
    .selectFrom('ledger_entries as e')
    .leftJoin('wallets as w', 'w.address', 'e.wallet')
    .select(sql<number>`count(*)`.as('n'))
    .where('w.address', 'is', null)
    .executeTakeFirstOrThrow();
  if (Number(orphanEntries.n) > 0) problems.push(`${orphanEntries.n} ledger entries belong to no wallet`);

  problems.push(...reservationChargeProblems(await finishedReservationCharges(db).execute()));

  const redeemed = await db
    .selectFrom('redeem_codes as c')
    .select([
      'c.id',
      'c.value_usdc',
      'c.redeemed_by',
      sql<number>`(select count(*) from ledger_entries e where e.kind = 'redeem' and e.reference = ${sql.lit('redeem:')} || cast(c.id as text))`.as('n'),
    ])
    .execute();
  for (const c of redeemed) {
    const expected = c.redeemed_by ? 1 : 0;
    if (Number(c.n) !== expected) problems.push(`redeem code #${c.id}: ${c.n} credits, expected ${expected}`);
  }

  problems.push(...(await paymentStateProblems(db)));
  problems.push(...(await paymentProblems(db)));
  const upto = await uptoProblems(db);
  problems.push(...upto.problems);
  const channels = await channelProblems(db);
  problems.push(...channels.problems);
  problems.push(...(await usageTotalsProblems(db)));
  problems.push(...(await keySpendProblems(db)));
  problems.push(...(await usageDailyProblems(db)));

  const findings = (await findChargesAboveReservation(db)).map(
    (r) => `request ${r.requestId} (wallet ${r.wallet}): charged ${r.chargedUsdc} above its reservation of ${r.reservedUsdc}`,
  );
  findings.push(...upto.findings, ...channels.findings, ...(await shortfallFindings(db)));
  return {
    ok: problems.length === 0,
    wallets: wallets.length,
    entries: Number(totals.entries),
    creditsUsdc: credits,
    chargesUsdc: charges,
    problems,
    findings,
  };
}

/**
 * The late charges that fell short (settle_shortfalls, newest 100): a finding of every check, the
 * incremental one too, since `tollgate admin ledger-check` without --full is the one an operator's
 * cron runs. The table holds one row per shortfall only (outages), so reading its newest is cheap.
 */
export async function shortfallFindings(db: Kysely<Database>): Promise<string[]> {
  const shortfalls = await db.selectFrom('settle_shortfalls').selectAll().orderBy('created_at', 'desc').limit(100).execute();
  return shortfalls.map(
    (f) =>
      `request ${f.request_id} (wallet ${f.wallet}): answered during a database outage and charged late ${f.charged_usdc} of its ${f.requested_usdc} (the wallet's free balance or its key's spend limit ran short)`,
  );
}

/**
 * The top-up payments against the ledger. A credited payment's credit must be exactly its recorded
 * on-chain amount in micro-USDC, that on-chain amount must be the payment's recorded terms, and the
 * terms' micro-USDC must agree with its token amount (a reopened row with new terms could credit
 * 10,000 USD for 1 USDC while every other check passed). `ledger-check --chain` also re-reads the
 * on-chain amount from each receipt (src/payments/audit.ts).
 */
export async function paymentProblems(db: Kysely<Database>): Promise<string[]> {
  const problems: string[] = [];
  const payments = await db
    .selectFrom('payments as p')
    .select([
      'p.id',
      'p.state',
      'p.amount_atomic',
      'p.amount_usdc',
      'p.token_decimals',
      'p.onchain_amount_atomic',
      'p.upto_state',
      sql<number>`(select count(*) from ledger_entries e where e.kind = 'topup' and e.reference = ${sql.lit('payment:')} || p.id)`.as('n'),
      sql<number>`(select count(*) from ledger_entries e where e.kind = 'topup' and e.reference = ${sql.lit('payment:')} || p.id and e.wallet = p.payer)`.as(
        'to_payer',
      ),
      sql<number>`coalesce((select sum(e.amount_usdc) from ledger_entries e where e.kind = 'topup' and e.reference = ${sql.lit('payment:')} || p.id), 0)`.as(
        'credit',
      ),
    ])
    .execute();
  for (const p of payments) {
    const credit = (PAYMENT_STATES[p.state] as { credit: string } | undefined)?.credit;
    // An upto payment's credit is its hold (an `upto_hold`, or a `topup` on older rows), counted by uptoProblems.
    if (credit === 'hold') continue;
    // What its state says the ledger holds: none, or one credit to the payer.
    const expected = credit === 'none' ? 0 : 1;
    if (Number(p.n) !== expected) problems.push(`payment ${p.id} (${p.state}): ${p.n} top-up credits, expected ${expected}`);
    if (expected !== 1 || p.state !== 'credited') continue;
    if (Number(p.to_payer) !== 1) problems.push(`payment ${p.id}: its credit does not go to the payer`);
    if (p.token_decimals === null) {
      problems.push(
        `payment ${p.id}: its recorded amounts disagree (${p.amount_atomic} token units, ${p.amount_usdc} micro-USDC); compare with the chain (ledger-check --chain)`,
      );
      continue;
    }
    const unit = 10n ** BigInt(Number(p.token_decimals) - 6);
    if (BigInt(p.amount_atomic) / unit !== BigInt(p.amount_usdc)) {
      problems.push(`payment ${p.id}: terms of ${p.amount_atomic} token units are not ${p.amount_usdc} micro-USDC`);
    }
    if (p.onchain_amount_atomic === null) {
      problems.push(`payment ${p.id}: credited with no on-chain amount recorded`);
      continue;
    }
    if (p.onchain_amount_atomic !== p.amount_atomic) {
      problems.push(`payment ${p.id}: ${p.onchain_amount_atomic} token units arrived on chain but its terms are ${p.amount_atomic}`);
    }
    const fromChain = BigInt(p.onchain_amount_atomic) / unit;
    if (BigInt(p.credit) !== fromChain) problems.push(`payment ${p.id}: credited ${p.credit} micro-USDC, but ${fromChain} arrived on chain`);
  }
  const unbacked = await db
    .selectFrom('ledger_entries as e')
    .select(sql<number>`count(*)`.as('n'))
    .where('e.kind', '=', 'topup')
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('payments as p')
            .select('p.id')
            .whereRef(sql`${sql.lit('payment:')} || p.id`, '=', 'e.reference'),
        ),
      ),
    )
    .executeTakeFirstOrThrow();
  if (Number(unbacked.n) > 0) problems.push(`${unbacked.n} top-up credits have no payment behind them`);
  return problems;
}
