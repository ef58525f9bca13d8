import type { Operands, Rows } from './statement.ts';

/** A reservation's row: written pending by reserve, closed exactly once by a finish or the sweeper. */

export type NewReservation = Operands<'wallet' | 'apiKeyId' | 'requestId' | 'amount' | 'leaseExpiresAt' | 'at'>;

/**
 * On an upto hold wallet `<payer>#upto` (src/ledger/operations/upto-hold.ts), the payment holding
 * now: the only one whose money a reservation there can lock, as a payer holds one payment at a
 * time and a fixed one leaves the wallet at 0. The reservation keeps it so that its charge, however
 * late, is taken from that payment's hold and never from a later one's (late-charge.ts).
 */
const holdingUptoPayment = (wallet: string): string =>
  `CASE WHEN ${wallet} LIKE '%#upto' THEN (SELECT id FROM payments WHERE upto_state = 'holding' AND payer = substr(${wallet}, 1, length(${wallet}) - 5)) END`;

/** A new pending reservation. */
export const insertReservation = (rows: Rows, v: NewReservation): string =>
  `INSERT INTO reservations
  (wallet, api_key_id, request_id, amount_usdc, status, charged_usdc, lease_expires_at, created_at, finished_at, upto_payment_id)
  ${rows([v.wallet, v.apiKeyId, v.requestId, v.amount, "'pending'", 'NULL', v.leaseExpiresAt, v.at, 'NULL', holdingUptoPayment(v.wallet)])}`;

export type Closing = Operands<'status' | 'charged' | 'at' | 'requestId'>;

/**
 * Closes a reservation with what it charged. `whileStatus` is the state it must still be in: in a
 * unit this is the exactly-once guard (a second finish changes no row). The finish statement
 * passes none: the row it locked FOR UPDATE as `pending` is its guard, and `from` reads its values.
 * `joined`: the condition that joins `from`'s table to the reservation (SQLite's UPDATE … FROM).
 */
export const closeReservation = (v: Closing, opts: { whileStatus?: 'pending' | 'voided'; from?: string; joined?: string } = {}): string =>
  `UPDATE reservations SET status = ${v.status}, charged_usdc = ${v.charged}, finished_at = ${v.at}${opts.from ?? ''} WHERE request_id = ${v.requestId}${
    opts.whileStatus ? ` AND status = '${opts.whileStatus}'` : ''
  }${opts.joined ? ` AND ${opts.joined}` : ''}`;

/** A finish that charged nothing is a void: the status it leaves, decided in a unit... */
export const statusAfter = (charged: number): 'settled' | 'voided' => (charged > 0 ? 'settled' : 'voided');
/** ...and the same rule inside one statement. */
export const statusAfterSql = (charged: string): string => `CASE WHEN ${charged} > 0 THEN 'settled' ELSE 'voided' END`;
