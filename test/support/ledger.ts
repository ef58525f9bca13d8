import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import type { UsageRecord } from '../../src/ledger/reservations.ts';
import type { Database } from '../../src/storage/schema.ts';
import { auditCreditsOnChain } from '../../src/payments/audit.ts';
import type { PublicClient } from 'viem';

/** Ledger fixtures for tests that drive src/ledger directly (no gateway in between). */
let counter = 0;

/** A wallet address no other test in this process uses. */
export function newWallet(): string {
  return `0x${(++counter).toString(16).padStart(40, '0')}`;
}

/** A new wallet holding `amountUsdc`, credited by an adjustment. */
export async function fundedWallet(db: Kysely<Database>, amountUsdc: number): Promise<string> {
  const wallet = newWallet();
  await adjustBalance(db, { wallet, amountUsdc });
  return wallet;
}

/** The usage row a finish writes; the figures do not matter to the ledger tests. */
export function usageRecord(requestId: string, wallet: string): UsageRecord {
  return {
    requestId,
    apiKeyId: 1,
    wallet,
    model: 'p/m',
    provider: 'p',
    promptTokens: 10,
    completionTokens: 5,
    reasoningTokens: 0,
    cachedTokens: 0,
    providerCostUsdc: 1,
    status: 'ok',
    latencyMs: 1,
    estimated: false,
  };
}

/** Fails with the list of broken invariants (src/ledger/invariants.ts), if any. */
export async function assertLedgerConsistent(db: Kysely<Database>): Promise<void> {
  assert.deepEqual((await checkLedger(db)).problems, []);
}

/**
 * The ledger's invariants hold, and the chain agrees (`ledger-check --chain`): every credited
 * payment's settling transaction moved exactly what it recorded. `atLeast`: credited payments checked.
 */
export async function assertLedgerAndChainAgree(db: Kysely<Database>, client: PublicClient, atLeast = 0): Promise<void> {
  await assertLedgerConsistent(db);
  const audit = await auditCreditsOnChain(db, () => client);
  assert.deepEqual(audit.problems, []);
  assert.ok(audit.checked >= atLeast, `${audit.checked} credited payments checked on chain, expected at least ${atLeast}`);
}
