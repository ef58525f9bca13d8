import type PgModule from 'pg';

/**
 * The SQLSTATE of every query the server refused on the pool's connections (`none`: failed on the client's
 * side), in order: what a test of the lane's statement preparation reads to tell a unit's own failure from a
 * statement refused because of another transaction's Parse.
 */
export function recordRefusals(pool: PgModule.Pool): string[] {
  const refused: string[] = [];
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: typeof query }).query = (...args: unknown[]) => {
      const answer = query(...args);
      answer.catch((e: { code?: string }) => refused.push(e.code ?? 'none'));
      return answer;
    };
  });
  return refused;
}
