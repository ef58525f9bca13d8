/** The last instant a JavaScript Date holds (8.64e15 ms after 1970), in Unix seconds. */
const LAST_DATE_SECONDS = 8_640_000_000_000;

/**
 * A signed authorization's deadline (Unix seconds) as a date, for refusals and ledger-check. A payer
 * may sign any deadline far enough ahead (a uint256, stored clamped to Number.MAX_SAFE_INTEGER),
 * and `toISOString` throws past the last date: the refusal of an unsettled upto payment was then a
 * 500 and ledger-check crashed on the payment. Such a deadline is written as its seconds.
 */
export function deadlineText(unixSeconds: number): string {
  if (Number.isFinite(unixSeconds) && Math.abs(unixSeconds) <= LAST_DATE_SECONDS) return new Date(unixSeconds * 1000).toISOString();
  return `${unixSeconds} s after 1970 (past any date)`;
}
