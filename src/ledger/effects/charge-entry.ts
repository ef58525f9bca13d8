import type { Operands, Rows } from './statement.ts';

/** `amount` is negative: the entry is what the balance lost. */
export type ChargeEntry = Operands<'wallet' | 'amount' | 'requestId' | 'note' | 'at'>;

/**
 * A request's charge in the append-only ledger, referenced by its request id (unique per request
 * among charges). Written only when something was charged.
 */
export const chargeEntry = (rows: Rows, v: ChargeEntry): string =>
  `INSERT INTO ledger_entries (wallet, kind, amount_usdc, reference, note, created_at) ${rows([v.wallet, "'charge'", v.amount, v.requestId, v.note, v.at])}`;
