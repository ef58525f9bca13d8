import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

/**
 * The x402 `upto` payments against the ledger (docs/DECISIONS.md, x402 `upto`): the maximum is credited once to the
 * payer's hold wallet (`<payer>#upto`, never the payer), the unspent part is released once the
 * charge is fixed, so credit − release is what the request was charged, and that charge is the
 * amount the payment settles (settle_amount_atomic) and, once settled, the amount that arrived on
 * chain (onchain_amount_atomic; `ledger-check --chain` re-reads it from the receipt). A hold wallet
 * holds nothing once its payment's charge is fixed. An unsettled payment is a finding (the books
 * balance; the chain owes the charge) until it is retried or written off.
 */
/**
 * A settle is sent within topup.settleWaitSeconds and finished by the reconciler within a pass or
 * two; one untouched this long is stuck (its transaction unmined and unreplaced, the reconciler not
 * running, or the RPC down): a finding, and tollgate_upto_settles_stuck. The reconciler re-sends a
 * dropped settle and gives it up past the authorization's deadline (reconcile-upto.ts).
 */
export const UPTO_SETTLE_STUCK_MS = 10 * 60_000;

export async function uptoProblems(db: Kysely<Database>, now = Date.now()): Promise<{ problems: string[]; findings: string[] }> {
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
      sql<number>`coalesce((select sum(e.amount_usdc) from ledger_entries e where e.kind = 'topup' and e.reference = ${sql.lit('payment:')} || p.id and e.wallet = p.payer || ${sql.lit('#upto')}), 0)`.as('credit'),
      sql<number>`coalesce((select -sum(e.amount_usdc) from ledger_entries e where e.kind = 'adjustment' and e.reference = ${sql.lit('upto-release:')} || p.id), 0)`.as('released'),
      sql<number>`coalesce((select w.balance_usdc from wallets w where w.address = p.payer || ${sql.lit('#upto')}), 0)`.as('hold'),
    ])
    .where('p.upto_state', 'is not', null)
    .execute();
  for (const p of rows) {
    const credit = Number(p.credit);
    if (p.status !== 'credited' || credit !== Number(p.amount_usdc)) problems.push(`upto payment ${p.id} (${p.status}/${p.upto_state}): ${credit} micro-USDC held in ${p.payer}#upto, expected its maximum ${p.amount_usdc}`);
    if (p.upto_state === 'holding') continue;
    if (Number(p.hold) !== 0 && !rows.some((o) => o.payer === p.payer && o.upto_state === 'holding')) problems.push(`upto payment ${p.id}: ${p.payer}#upto still holds ${p.hold} micro-USDC after its charge was fixed`);
    const charge = credit - Number(p.released);
    const unit = 10n ** BigInt(Number(p.token_decimals ?? 6) - 6);
    if (p.settle_amount_atomic === null || BigInt(p.settle_amount_atomic) !== BigInt(charge) * unit) {
      problems.push(`upto payment ${p.id}: charged ${charge} micro-USDC but settles ${p.settle_amount_atomic ?? 'nothing'} token units`);
    }
    if (p.upto_state === 'settled' && p.onchain_amount_atomic !== p.settle_amount_atomic) {
      problems.push(`upto payment ${p.id}: ${p.onchain_amount_atomic ?? 'nothing'} token units arrived on chain for a charge of ${p.settle_amount_atomic}`);
    }
    if (p.upto_state === 'unsettled') findings.push(`upto payment ${p.id} (wallet ${p.payer}): charged ${charge} micro-USDC, not settled on chain (${p.failure_reason}); tollgate admin upto retry ${p.id}, or write-off`);
    if (p.upto_state === 'settling' && Number(p.updated_at) < now - UPTO_SETTLE_STUCK_MS) {
      const since = new Date(Number(p.updated_at)).toISOString();
      const deadline = new Date(Number(p.valid_before) * 1000).toISOString();
      findings.push(
        `upto payment ${p.id} (wallet ${p.payer}): charged ${charge} micro-USDC, settling since ${since} (${p.tx_hash ?? 'not sent'}); ` +
          `the gateway's reconciler sends it again if it was dropped, and records it unsettled past its deadline ${deadline}. ` +
          'Check that a gateway is running and its RPC answers',
      );
    }
    if (p.upto_state === 'written_off') findings.push(`upto payment ${p.id} (wallet ${p.payer}): ${charge} micro-USDC written off (${p.failure_reason})`);
  }
  return { problems, findings };
}
