/**
 * Inline checks of the money invariants an operation relies on or promises (its preconditions and
 * postconditions), in the habit of TigerBeetle's assertions: each is a comparison of numbers the
 * operation already holds, so they cost nothing, and a broken one stops the operation loudly
 * (its unit rolls back) instead of writing money that the ledger check finds only later.
 */

/** A money invariant did not hold: a defect in the code, never a refusal of bad input. */
export class MoneyInvariantError extends Error {
  override name = 'MoneyInvariantError';
}

/** Throws MoneyInvariantError with `what` (built only when it fails) unless `holds`. */
export function assertMoney(holds: boolean, what: () => string): asserts holds {
  if (!holds) throw new MoneyInvariantError(what());
}

/** `value` is an amount of micro-USDC: a safe integer, not negative. */
export function assertAmount(name: string, value: number): void {
  assertMoney(Number.isSafeInteger(value) && value >= 0, () => `${name} must be a non-negative safe integer of micro-USDC, got ${value}`);
}

/** A wallet after a movement: neither figure negative, and the balance covers what is locked (the floor). */
export function assertWalletFloor(wallet: string, balance: number, locked: number): void {
  const what = () => `wallet ${wallet}: balance ${balance} and locked ${locked} after a movement (the balance must cover what is locked)`;
  assertMoney(locked >= 0 && balance >= locked, what);
}
