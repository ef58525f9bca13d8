/**
 * How the two engines report the constraints callers branch on. Here, not in a domain folder,
 * because the error texts and codes are the databases' own (SQLite, PostgreSQL).
 */

/** A debit from a wallet that has no balance at all (no wallet row): the refusal the balance CHECKs give. */
export class InsufficientBalanceError extends Error {
  constructor(wallet: string) {
    super(`wallet ${wallet} has no balance to debit`);
  }
}

/** True when a database error is one of the wallet CHECKs (balance would go negative or below locked). */
export function isBalanceConstraintError(err: unknown): boolean {
  if (err instanceof InsufficientBalanceError) return true;
  const text = String((err as { message?: string })?.message ?? err);
  return /wallets_(balance_nonnegative|locked_within_balance|locked_nonnegative)|CHECK constraint failed/i.test(text);
}

/** True when a database error is a unique-key violation (SQLite or PostgreSQL). */
export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === '23505' || /UNIQUE constraint failed/i.test(String(e?.message ?? ''));
}
