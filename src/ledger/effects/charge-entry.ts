import type { Rows } from './statement.ts';

export interface ChargeEntry {
  wallet: string;
  /** Negative: the entry is what the balance lost. */
  amount: string;
  requestId: string;
  note: string;
  at: string;
}

/**
 * A request's charge in the append-only ledger, referenced by its request id (unique per request
 * among charges). Written only when something was charged.
 */
export const chargeEntry = (rows: Rows, v: ChargeEntry): string =>
  `INSERT INTO ledger_entries (wallet, kind, amount_usdc, reference, note, created_at) ${rows([v.wallet, "'charge'", v.amount, v.requestId, v.note, v.at])}`;
