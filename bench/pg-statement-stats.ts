import pg from 'pg';

/** The ledger's statements as PostgreSQL timed them (pg_stat_statements), between a reset and a read. */
export interface LedgerStatementStats {
  reset(): Promise<void>;
  /** One line per kind of statement: calls, server time per call, and in all. */
  read(): Promise<string[]>;
  close(): Promise<void>;
}

/**
 * The server preloads pg_stat_statements (ttft-phase.ts --pg-stats). The one-statement reserve and
 * finish are told apart by their first CTE; BEGIN and COMMIT show how many transactions ran.
 */
const KINDS: Array<[string, string]> = [
  ['reserve (one statement)', 'WITH locked AS%'],
  ['finish (one statement)', 'WITH pending AS%'],
  ['COMMIT', 'COMMIT'],
];

export async function ledgerStatementStats(databaseUrl: string): Promise<LedgerStatementStats> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  return {
    reset: async () => void (await client.query('SELECT pg_stat_statements_reset()')),
    read: async () => {
      const lines: string[] = [];
      for (const [kind, pattern] of KINDS) {
        const { rows } = await client.query<{ calls: string; ms: number }>(
          `SELECT coalesce(sum(calls), 0) AS calls, coalesce(sum(total_exec_time), 0) AS ms FROM pg_stat_statements
           WHERE query LIKE $1 AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          [pattern],
        );
        const calls = Number(rows[0]?.calls ?? 0);
        const ms = Number(rows[0]?.ms ?? 0);
        const each = calls ? ((ms * 1000) / calls).toFixed(0) : '–';
        lines.push(`server: ${kind.padEnd(24)} ${String(calls).padStart(6)} calls, ${each} µs each, ${ms.toFixed(0)} ms in all`);
      }
      return lines;
    },
    close: () => client.end(),
  };
}
