import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { after, before, describe, test } from 'node:test';
import type PgModule from 'pg';
import { sql } from 'kysely';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { COMMITS_IN_FLIGHT, MAX_UNITS_PER_COMMIT, PostgresGroupCommit } from '../../src/storage/postgres-group-commit.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { recordRefusals } from '../support/pg-refusals.ts';

const pg = createRequire(import.meta.url)('pg') as typeof PgModule;

/**
 * The lane prepares each statement text once per connection, by name, and pg sends only a Bind for
 * a name whose Parse it has sent, before the server has answered it. A Parse that lands in an
 * aborted transaction is refused (25P02), so a statement written behind it in the next pipelined
 * transaction names a statement the server never created (26000). That transaction must then roll
 * back and run its units again, never fail them: every unit but the one that failed commits once.
 */
describe('attack: a named statement whose first Parse lands in an aborted pipelined transaction', () => {
  let url: string;
  let s: Storage;
  before(async () => {
    url = await freshDatabaseUrl('postgres');
    s = openStorage(url);
    await sql`create table first_parse (n integer primary key)`.execute(s.db);
  });
  after(() => s.close());

  test('a failing unit, then a text never prepared, then backlog transactions of it: only the failing unit fails, each other commits once', async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1, pipeline: true } as PgModule.PoolConfig);
    pool.on('error', () => undefined);
    /** SQLSTATEs the server answered the lane's statements with. */
    const refused = recordRefusals(pool);
    const lane = new PostgresGroupCommit(pool);
    try {
      // A text no connection of this process has prepared: its first Parse is the one in the aborted transaction.
      const insert = `insert into first_parse (n) values (?) /* ${randomBytes(6).toString('hex')} */`;
      const one = { oneStatement: true, nothingAfterStatement: true };
      const units = MAX_UNITS_PER_COMMIT * COMMITS_IN_FLIGHT + MAX_UNITS_PER_COMMIT;
      const outcomes = await Promise.all(
        Array.from({ length: units }, (_, n) =>
          lane.submit(n === 0 ? (tx) => tx.get('select 1 / (? - 1) as x', [1]) : (tx) => tx.run(insert, [n]), one).then(
            () => 'ok',
            (e: { code?: string }) => e.code ?? String(e),
          ),
        ),
      );
      assert.deepEqual(outcomes[0], '22012', 'the first unit fails: division by zero');
      assert.deepEqual(
        outcomes.slice(1).filter((o) => o !== 'ok'),
        [],
        `refused on the wire: ${[...new Set(refused)].join(', ')}`,
      );
      const rows = await sql<{ n: number; c: number }>`select count(*)::int as c, count(distinct n)::int as n from first_parse`.execute(s.db);
      assert.deepEqual(rows.rows[0], { c: units - 1, n: units - 1 });
      // Driven: the text's first Parse was refused in the aborted transaction, with transactions behind it.
      assert.ok(refused.includes('25P02'), `refused: ${[...new Set(refused)].join(', ')}`);
      // No statement named one the server never created (26000) or created already (42P05): no transaction but the
      // failing unit's was refused, so none ran its units again alone.
      assert.deepEqual(
        refused.filter((code) => code === '26000' || code === '42P05'),
        [],
      );
    } finally {
      await pool.end();
    }
  });
});
