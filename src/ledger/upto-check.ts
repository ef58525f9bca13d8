import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';
import { deadlineText } from './deadline-text.ts';
import { strayHoldWalletEntries, type HoldWallets } from './hold-wallet-check.ts';

/**
 * The x402 `upto` payments against the ledger: each is held once (its maximum credited to the
 * payer's hold wallet `<payer>#upto`, never the payer) and, once its charge is fixed, released once
 * (its unspent part taken back out), so hold − release is what the request was charged, and that
 * charge is the amount the payment settles (settle_amount_atomic) and, once settled, the amount
 * that arrived on chain (onchain_amount_atomic; `ledger-check --chain` re-reads it from the
 * receipt). A hold wallet holds nothing once its payment's charge is fixed, and at most the
 * maximum while it is held. An unsettled payment is a finding (the books balance; the chain owes
 * the charge) until it is retried or written off.
 *
 * Two forms of the entries are read (docs/DECISIONS.md, "Upto holds are ledger operations"): the
 * hold's own kinds `upto_hold`/`upto_release` (reference `payment:<id>`, a release written even
 * for 0), and, on rows older than migration 015, a `topup` to the hold wallet and an `adjustment`
 * with reference `upto-release:<id>` (none when nothing was left).
 */
const HOLD = sql`(e.kind = 'upto_hold' or e.kind = 'topup') and e.reference = ${sql.lit('payment:')} || p.id`;
const OWN_RELEASE = sql`e.kind = 'upto_release' and e.reference = ${sql.lit('payment:')} || p.id`;
const OLDER_RELEASE = sql`e.kind = 'adjustment' and e.reference = ${sql.lit('upto-release:')} || p.id`;
const RELEASE = sql`((${OWN_RELEASE}) or (${OLDER_RELEASE}))`;
const HOLD_WALLET = sql`p.payer || ${sql.lit('#upto')}`;
// The charges of the payment's own requests: those whose reservation was made on its hold (reservations.upto_payment_id).
const OWN_REQUESTS = sql`select r.request_id from reservations r where r.upto_payment_id = p.id`;
const OWN_CHARGE = sql`e.kind = 'charge' and e.wallet = ${HOLD_WALLET} and e.reference in (${OWN_REQUESTS})`;

/**
 * A settle is sent within topup.settleWaitSeconds and finished by the reconciler within a pass or
 * two; one untouched this long is stuck (its transaction unmined and unreplaced, the reconciler not
 * running, or the RPC down): a finding, and tollgate_upto_settles_stuck. The reconciler re-sends a
 * dropped settle and gives it up past the authorization's deadline (reconcile-upto.ts).
 */
export const UPTO_SETTLE_STUCK_MS = 10 * 60_000;

/** `afterEntryId`: the incremental check's checkpoint; the per-entry rules of the hold wallets are checked on the entries after it only. */
export async function uptoProblems(db: Kysely<Database>, now = Date.now(), afterEntryId = 0): Promise<{ problems: string[]; findings: string[] }> {
  const problems: string[] = [];
  const findings: string[] = [];
  const rows = await db
    .selectFrom('payments as p')
    .select([
      'p.id',
      'p.payer',
      'p.status',
      'p.upto_state',
      'p.amount_usdc',
      'p.token_decimals',
      'p.settle_amount_atomic',
      'p.onchain_amount_atomic',
      'p.failure_reason',
      'p.tx_hash',
      'p.updated_at',
      'p.valid_before',
      sql<number>`coalesce((select sum(e.amount_usdc) from ledger_entries e where ${HOLD} and e.wallet = ${HOLD_WALLET}), 0)`.as('credit'),
      sql<number>`(select count(*) from ledger_entries e where ${HOLD})`.as('holds'),
      sql<number>`(select count(*) from ledger_entries e where ${HOLD} and e.kind = 'upto_hold')`.as('own_holds'),
      sql<number>`coalesce((select -sum(e.amount_usdc) from ledger_entries e where ${RELEASE}), 0)`.as('released'),
      sql<number>`(select count(*) from ledger_entries e where ${RELEASE})`.as('releases'),
      sql<number>`(select count(*) from ledger_entries e where ${RELEASE} and e.wallet <> ${HOLD_WALLET})`.as('released_elsewhere'),
      sql<number>`coalesce((select w.balance_usdc from wallets w where w.address = ${HOLD_WALLET}), 0)`.as('hold'),
      sql<number>`coalesce((select -sum(e.amount_usdc) from ledger_entries e where ${OWN_CHARGE}), 0)`.as('own_charges'),
    ])
    .where('p.upto_state', 'is not', null)
    .execute();
  for (const p of rows) {
    const credit = Number(p.credit);
    if (p.status !== 'credited' || credit !== Number(p.amount_usdc))
      problems.push(`upto payment ${p.id} (${p.status}/${p.upto_state}): ${credit} micro-USDC held in ${p.payer}#upto, expected its maximum ${p.amount_usdc}`);
    if (Number(p.holds) !== 1) problems.push(`upto payment ${p.id}: held ${p.holds} times, expected once (in ${p.payer}#upto)`);
    const releases = Number(p.releases);
    const released = Number(p.released);
    if (released < 0 || released > credit) problems.push(`upto payment ${p.id}: released ${released} micro-USDC of a hold of ${credit}`);
    if (Number(p.released_elsewhere) > 0) problems.push(`upto payment ${p.id}: a release taken from a wallet other than ${p.payer}#upto`);
    // Still holding (and never released): what the hold wallet no longer has; once released: what the release left behind.
    const spent = credit - (p.upto_state === 'holding' && releases === 0 ? Number(p.hold) : released);
    // Held by today's operations, every reservation on the hold names its payment (016, applied with 015): what left
    // the hold is exactly what its own requests were charged, or another debit took money held for this one.
    if (Number(p.own_holds) > 0 && spent !== Number(p.own_charges)) {
      problems.push(`upto payment ${p.id}: ${spent} micro-USDC left its hold in ${p.payer}#upto, but its own requests were charged ${p.own_charges}`);
    }
    if (p.upto_state === 'holding') {
      if (releases !== 0) problems.push(`upto payment ${p.id}: released ${releases} times while its request still holds the maximum`);
      if (Number(p.hold) > credit) problems.push(`upto payment ${p.id}: ${p.payer}#upto holds ${p.hold} micro-USDC, more than its hold of ${credit}`);
      continue;
    }
    // The hold's own operations release every fixed payment once (0 included); the older form wrote no release of 0.
    const expectedReleases = Number(p.own_holds) > 0 ? releases === 1 : releases <= 1;
    if (!expectedReleases) problems.push(`upto payment ${p.id}: released ${releases} times once its charge was fixed, expected once`);
    if (Number(p.hold) !== 0 && !rows.some((o) => o.payer === p.payer && o.upto_state === 'holding'))
      problems.push(`upto payment ${p.id}: ${p.payer}#upto still holds ${p.hold} micro-USDC after its charge was fixed`);
    const charge = credit - released;
    const unit = 10n ** BigInt(Number(p.token_decimals ?? 6) - 6);
    if (p.settle_amount_atomic === null || BigInt(p.settle_amount_atomic) !== BigInt(charge) * unit) {
      problems.push(`upto payment ${p.id}: charged ${charge} micro-USDC but settles ${p.settle_amount_atomic ?? 'nothing'} token units`);
    }
    if (p.upto_state === 'settled' && p.onchain_amount_atomic !== p.settle_amount_atomic) {
      problems.push(`upto payment ${p.id}: ${p.onchain_amount_atomic ?? 'nothing'} token units arrived on chain for a charge of ${p.settle_amount_atomic}`);
    }
    if (p.upto_state === 'unsettled')
      findings.push(
        `upto payment ${p.id} (wallet ${p.payer}): charged ${charge} micro-USDC, not settled on chain (${p.failure_reason}); tollgate admin upto retry ${p.id}, or write-off`,
      );
    if (p.upto_state === 'settling' && Number(p.updated_at) < now - UPTO_SETTLE_STUCK_MS) {
      const since = new Date(Number(p.updated_at)).toISOString();
      const deadline = deadlineText(Number(p.valid_before));
      findings.push(
        `upto payment ${p.id} (wallet ${p.payer}): charged ${charge} micro-USDC, settling since ${since} (${p.tx_hash ?? 'not sent'}); ` +
          `the gateway's reconciler sends it again if it was dropped, and records it unsettled past its deadline ${deadline}. ` +
          'Check that a gateway is running and its RPC answers',
      );
    }
    if (p.upto_state === 'written_off') findings.push(`upto payment ${p.id} (wallet ${p.payer}): ${charge} micro-USDC written off (${p.failure_reason})`);
  }
  problems.push(...(await strayHoldWalletEntries(db, UPTO_HOLDS, afterEntryId)));
  return { problems, findings };
}

/**
 * An older-form release (`adjustment`, `upto-release:<id>`) counts as one only when it names an upto
 * payment and left that payment's hold wallet: the reference is free text, so one naming no payment
 * would take money out of a hold that no payment's sums (released, released_elsewhere) ever read.
 * The id is cut from the reference so the planner can look the payment up by its key (PostgreSQL
 * chose one hashed scan of the upto payments per check instead: 0.5 ms for 600 entries); the reference is
 * then compared whole, by the very rule those sums read (OLDER_RELEASE), not by a pattern: SQLite's
 * `like` ignores case, and `UPTO-RELEASE:<id>` would pass here while no payment counts it.
 */
const OLDER_RELEASE_OF_ITS_PAYMENT = sql`exists (select 1 from payments p where p.id = substr(e.reference, ${sql.lit('upto-release:'.length + 1)})
  and ${OLDER_RELEASE} and p.upto_state is not null and ${HOLD_WALLET} = e.wallet)`;

/**
 * Entries of the hold's own kinds that belong to no upto payment's hold wallet, and money that
 * entered a hold wallet other than by a hold (either form) or left it other than by a request's
 * charge or a release (either form): either would be money no upto payment accounts for.
 */
const UPTO_HOLDS: HoldWallets = {
  suffix: '#upto',
  kinds: ['upto_hold', 'upto_release'],
  owned: sql<boolean>`exists (select 1 from payments p where p.upto_state is not null and ${sql.lit('payment:')} || p.id = e.reference and ${HOLD_WALLET} = e.wallet)`,
  credit: sql<boolean>`e.kind in ('upto_hold', 'topup')`,
  debit: sql<boolean>`e.kind = 'charge' or e.kind = 'upto_release' or (e.kind = 'adjustment' and ${OLDER_RELEASE_OF_ITS_PAYMENT})`,
  names: { entries: 'upto hold or release', ownerWallet: "upto payment's hold wallet", holdWallet: 'an upto hold wallet' },
};
