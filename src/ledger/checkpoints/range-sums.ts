import { sql, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { USAGE_SUMS } from './usage-sums.ts';

/**
 * Sums over a range of ids (the rows after a checkpoint), grouped. The group key is an expression
 * (`wallet || ''`, `+api_key_id`), not the bare column: on the column SQLite walks the index on it
 * (ledger_entries_wallet, request_usage_key) to group without sorting, reading every row ever made
 * and filtering the id afterwards; on the expression it searches the primary key's range and groups
 * the new rows alone (EXPLAIN QUERY PLAN in test/ledger/incremental-check-plan.test.ts).
 */
export const sumsPerWallet = (range: SelectQueryBuilder<Database, 'ledger_entries', object>) =>
  range.select([sql<string>`wallet || ''`.as('wallet'), sql<number>`sum(amount_usdc)`.as('sum')]).groupBy(sql`wallet || ''`);

export const usageSumsPerKey = (range: SelectQueryBuilder<Database, 'request_usage', object>) =>
  range
    .select([
      sql<number>`+api_key_id`.as('api_key_id'),
      sql<number>`count(*)`.as('request_count'),
      ...USAGE_SUMS.slice(1).map((c) => sql<number>`sum(${sql.ref(c)})`.as(c)),
    ])
    .groupBy(sql`+api_key_id`);
