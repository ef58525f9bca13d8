import { sql, type Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { DAY_MS } from '../days.ts';
import { findChargesAboveReservation, type ChargeAboveReservation } from '../over-reservation.ts';
import { paymentProblems, shortfallFindings, type LedgerCheck } from '../invariants.ts';
import { uptoProblems } from '../upto-check.ts';
import { channelProblems } from '../channel-check.ts';
import { paymentStateProblems } from '../payment-state-check.ts';
import { reservationChargeProblems } from '../reservation-charges.ts';
import { USAGE_SUMS, type Checkpoint } from './checkpoint-store.ts';
import { sumsPerWallet, usageSumsPerKey } from './range-sums.ts';

/**
 * The invariants of checkLedger, from a checkpoint: the rows at or below its boundaries are
 * counted by the sums it stored (proven by the check that wrote it), so only what came after is
 * read. Checked in full as before: each wallet's balance against its checkpointed ledger sum plus
 * its newer entries, locked against pending reservations, credits − charges against the sum of
 * balances, the per-key usage totals, payments and upto payments (a table of top-ups, not of
 * requests). Checked for new rows only: charge-once per reservation, redeem codes redeemed since
 * the checkpoint's first open day, orphan entries, and usage_daily for its open days (the cells it
 * stored plus the rows after it) and the days after. `--full` checks the rest: the older rows, and
 * key_spend (its month and total buckets span any number of days).
 */
export async function checkLedgerSince(db: Kysely<Database>, cp: Checkpoint): Promise<LedgerCheck> {
  const problems: string[] = [];
  const balances = await walletProblems(db, cp, problems);

  const totals = await db
    .selectFrom('ledger_entries')
    .where('id', '>', cp.last_entry_id)
    .select([
      sql<number>`count(*)`.as('entries'),
      sql<number>`coalesce(sum(case when amount_usdc > 0 then amount_usdc else 0 end), 0)`.as('credits'),
      sql<number>`coalesce(sum(case when amount_usdc < 0 then -amount_usdc else 0 end), 0)`.as('charges'),
      sql<number>`coalesce(sum(case when not exists (select 1 from wallets w where w.address = ledger_entries.wallet) then 1 else 0 end), 0)`.as('orphans'),
    ])
    .executeTakeFirstOrThrow();
  const credits = cp.credits_usdc + Number(totals.credits);
  const charges = cp.charges_usdc + Number(totals.charges);
  if (credits - charges !== balances.sum) problems.push(`credits ${credits} - charges ${charges} != sum of balances ${balances.sum}`);
  if (Number(totals.orphans) > 0) problems.push(`${totals.orphans} ledger entries belong to no wallet`);

  problems.push(...(await newReservationProblems(db, cp)));
  problems.push(...(await newRedeemProblems(db, cp)));
  problems.push(...(await paymentStateProblems(db)));
  problems.push(...(await paymentProblems(db)));
  const upto = await uptoProblems(db, Date.now(), cp.last_entry_id);
  problems.push(...upto.problems);
  const channels = await channelProblems(db, Date.now(), cp.last_entry_id);
  problems.push(...channels.problems);
  problems.push(...(await usageTotalsSince(db, cp)));
  problems.push(...(await newDaysProblems(db, cp)));

  const findings = (await chargesAboveReservationSince(db, cp)).map(
    (r) => `request ${r.requestId} (wallet ${r.wallet}): charged ${r.chargedUsdc} above its reservation of ${r.reservedUsdc}`,
  );
  findings.push(...upto.findings, ...channels.findings, ...(await shortfallFindings(db)));
  const entries = cp.entries + Number(totals.entries);
  return { ok: problems.length === 0, wallets: balances.count, entries, creditsUsdc: credits, chargesUsdc: charges, problems, findings };
}

async function walletProblems(db: Kysely<Database>, cp: Checkpoint, problems: string[]): Promise<{ sum: number; count: number }> {
  const wallets = await db.selectFrom('wallets').select(['address', 'balance_usdc', 'locked_usdc']).execute();
  const proven = await db.selectFrom('ledger_checkpoint_wallets').selectAll().execute();
  const sumPerWallet = ['wallet', sql<number>`sum(amount_usdc)`.as('sum')] as const;
  const newer = await sumsPerWallet(db.selectFrom('ledger_entries').where('id', '>', cp.last_entry_id)).execute();
  const pending = await db.selectFrom('reservations').where('status', '=', 'pending').select(sumPerWallet).groupBy('wallet').execute();
  const ledger = new Map<string, number>();
  const sums = [...proven.map((p) => ({ wallet: p.wallet, sum: p.ledger_usdc })), ...newer];
  for (const r of sums) ledger.set(r.wallet, (ledger.get(r.wallet) ?? 0) + Number(r.sum));
  const locked = new Map(pending.map((r) => [r.wallet, Number(r.sum)]));
  let sum = 0;
  for (const w of wallets) {
    const balance = Number(w.balance_usdc);
    const lockedUsdc = Number(w.locked_usdc);
    const ledgerSum = ledger.get(w.address) ?? 0;
    const pendingSum = locked.get(w.address) ?? 0;
    sum += balance;
    if (balance !== ledgerSum) problems.push(`wallet ${w.address}: balance ${balance} != ledger sum ${ledgerSum}`);
    if (lockedUsdc !== pendingSum) problems.push(`wallet ${w.address}: locked ${lockedUsdc} != pending reservations ${pendingSum}`);
    if (balance < 0) problems.push(`wallet ${w.address}: negative balance ${balance}`);
    if (lockedUsdc < 0 || lockedUsdc > balance) problems.push(`wallet ${w.address}: locked ${lockedUsdc} outside 0..${balance}`);
  }
  return { sum, count: wallets.length };
}

/**
 * The requests charged by an entry after `lastEntryId`. `kind || ''` keeps the planner on the primary
 * key's range (the new entries only): on the kind itself SQLite walks ledger_entries_once (kind=?),
 * every charge entry ever made, which grows with history instead of with new activity.
 */
export const chargedAfter = (db: Kysely<Database>, lastEntryId: number) =>
  db.selectFrom('ledger_entries').select('reference').where('id', '>', lastEntryId).where(sql`kind || ''`, '=', 'charge');

/**
 * Finished reservations with their charge entries counted and summed, by one join on the entries'
 * (kind, reference) index: one seek per reservation where checkLedger's two subqueries make two,
 * which was the largest cost per new request (bench/README.md).
 */
export const finishedWithCharges = (db: Kysely<Database>) =>
  db
    .selectFrom('reservations as r')
    .leftJoin('ledger_entries as e', (j) => j.on('e.kind', '=', 'charge').onRef('e.reference', '=', 'r.request_id'))
    .select([
      'r.request_id',
      'r.charged_usdc',
      sql<number>`count(e.id)`.as('charge_entries'),
      sql<number>`coalesce(-sum(e.amount_usdc), 0)`.as('charged_by_ledger'),
    ])
    .where('r.status', '!=', 'pending')
    .groupBy('r.id');

/** Reservations created after the checkpoint, or charged by an entry after it: each charged once, by what it records. */
async function newReservationProblems(db: Kysely<Database>, cp: Checkpoint): Promise<string[]> {
  // Two range reads rather than one OR, which neither engine answers from the indexes.
  const created = await finishedWithCharges(db).where('r.id', '>', cp.last_reservation_id).execute();
  const charged = await finishedWithCharges(db)
    .where('r.id', '<=', cp.last_reservation_id)
    .where('r.request_id', 'in', chargedAfter(db, cp.last_entry_id))
    .execute();
  return reservationChargeProblems([...created, ...charged]);
}

/**
 * The charges above their reservation among the requests settled since the checkpoint: reservations
 * created after it, and older ones charged by an entry after it (a request reserved before the
 * boundary and settled after it; the next checkpoint's check would never look at it again). Newest
 * 100, as the full check lists them.
 */
async function chargesAboveReservationSince(db: Kysely<Database>, cp: Checkpoint): Promise<ChargeAboveReservation[]> {
  const created = await findChargesAboveReservation(db, 100, cp.last_reservation_id);
  const charged = await db
    .selectFrom('reservations')
    .select(['id', 'request_id', 'wallet', 'amount_usdc', 'charged_usdc'])
    .where('id', '<=', cp.last_reservation_id)
    .where('request_id', 'in', chargedAfter(db, cp.last_entry_id))
    .where(sql`status || ''`, '=', 'settled')
    .whereRef('charged_usdc', '>', 'amount_usdc')
    .orderBy('id', 'desc')
    .limit(100)
    .execute();
  const older = charged.map((r) => ({ requestId: r.request_id, wallet: r.wallet, reservedUsdc: Number(r.amount_usdc), chargedUsdc: Number(r.charged_usdc) }));
  // Every created one is newer than every older one (ids): created first, then the older, newest first.
  return [...created, ...older].slice(0, 100);
}

async function newRedeemProblems(db: Kysely<Database>, cp: Checkpoint): Promise<string[]> {
  const rows = await db
    .selectFrom('redeem_codes as c')
    .select([
      'c.id',
      sql<number>`(select count(*) from ledger_entries e where e.kind = 'redeem' and e.reference = ${sql.lit('redeem:')} || cast(c.id as text))`.as('n'),
    ])
    .where('c.redeemed_at', '>=', cp.cells_from * DAY_MS)
    .execute();
  return rows.filter((c) => Number(c.n) !== 1).map((c) => `redeem code #${c.id}: ${c.n} credits, expected 1`);
}

/** usage_totals per key against the checkpoint's usage sums plus the rows after it. */
async function usageTotalsSince(db: Kysely<Database>, cp: Checkpoint): Promise<string[]> {
  const proven = await db.selectFrom('ledger_checkpoint_usage').selectAll().execute();
  const newer = await usageSumsPerKey(db.selectFrom('request_usage').where('id', '>', cp.last_usage_id)).execute();
  const kept = await db.selectFrom('usage_totals').selectAll().execute();
  const expected = new Map<number, Record<string, number>>();
  for (const r of [...proven, ...newer] as unknown as Record<string, number>[]) {
    const e = expected.get(Number(r.api_key_id)) ?? Object.fromEntries(USAGE_SUMS.map((c) => [c, 0]));
    for (const c of USAGE_SUMS) e[c] = (e[c] ?? 0) + Number(r[c]);
    expected.set(Number(r.api_key_id), e);
  }
  const problems: string[] = [];
  const keys = new Set([...expected.keys(), ...kept.map((k) => Number(k.api_key_id))]);
  for (const key of keys) {
    const t = kept.find((k) => Number(k.api_key_id) === key) as unknown as Record<string, number> | undefined;
    const want = (c: string) => expected.get(key)?.[c] ?? 0;
    const wrong = USAGE_SUMS.filter((c) => Number(t?.[c] ?? 0) !== want(c)).map((c) => `${c} ${Number(t?.[c] ?? 0)} != ${want(c)}`);
    if (wrong.length > 0) problems.push(`api key #${key}: usage totals disagree with request_usage (${wrong.join(', ')})`);
  }
  return problems;
}

/** usage_daily from the checkpoint's first open day: its stored cells plus the rows after it. */
async function newDaysProblems(db: Kysely<Database>, cp: Checkpoint): Promise<string[]> {
  const day = sql<number>`created_at / ${sql.lit(DAY_MS)}`;
  const rows = await db
    .selectFrom('request_usage')
    .where('id', '>', cp.last_usage_id)
    .where('created_at', '>=', cp.cells_from * DAY_MS)
    .select(['wallet', 'api_key_id', day.as('day'), sql<number>`count(*)`.as('request_count'), sql<number>`sum(charged_usdc)`.as('charged_usdc')])
    .groupBy(['wallet', 'api_key_id', day])
    .execute();
  const proven = await db.selectFrom('ledger_checkpoint_days').selectAll().execute();
  const daily = await db
    .selectFrom('usage_daily')
    .where('day', '>=', cp.cells_from)
    .select(['wallet', 'api_key_id', 'day', 'request_count', 'charged_usdc'])
    .execute();
  const cells = new Map<string, [number, number]>();
  const cellOf = (r: { wallet: string; api_key_id: unknown; day: unknown }) => `wallet ${r.wallet}, day ${Number(r.day)}, api key #${Number(r.api_key_id)}`;
  for (const r of [...proven, ...rows]) {
    const [count, charged] = cells.get(cellOf(r)) ?? [0, 0];
    cells.set(cellOf(r), [count + Number(r.request_count), charged + Number(r.charged_usdc)]);
  }
  const problems: string[] = [];
  for (const d of daily) {
    const id = cellOf(d);
    const [count, charged] = cells.get(id) ?? [0, 0];
    cells.delete(id);
    if (count !== Number(d.request_count) || charged !== Number(d.charged_usdc)) {
      problems.push(`${id}: daily usage totals disagree with request_usage (requests ${d.request_count} != ${count}, charged ${d.charged_usdc} != ${charged})`);
    }
  }
  for (const [id, [count]] of cells) problems.push(`${id}: ${count} requests with no daily usage totals`);
  return problems;
}
