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
 * Statement names are the process's (one per text), the server's prepared statements are each connection's:
 * two lanes on two connections of one pool use the same never-prepared text at once, each behind a failing unit
 * that aborts its first transaction, in several rounds (so a connection that prepared the text on one lane's
 * turn serves the other's next). The text's named and unnamed uses interleave across the connections; no
 * statement may name one its connection never created (26000) or parse a name twice (42P05).
 */
describe('attack: a new statement text used by two lanes at once, each behind an aborted transaction', () => {
  let url: string;
  let s: Storage;
  before(async () => {
    url = await freshDatabaseUrl('postgres');
    s = openStorage(url);
    await sql`create table two_lanes (n integer primary key)`.execute(s.db);
  });
  after(() => s.close());

  test('three rounds of two lanes: only the failing units fail, each other commits once, nothing refused but them', async () => {
    const pool = new pg.Pool({ connectionString: url, max: 2, pipeline: true } as PgModule.PoolConfig);
    pool.on('error', () => undefined);
    const refused = recordRefusals(pool);
    const lanes = [new PostgresGroupCommit(pool), new PostgresGroupCommit(pool)];
    const one = { oneStatement: true, nothingAfterStatement: true };
    const perLane = MAX_UNITS_PER_COMMIT * COMMITS_IN_FLIGHT;
    let next = 0;
    try {
      for (let round = 0; round < 3; round++) {
        // A text no connection has prepared: a new comment each round.
        const insert = `insert into two_lanes (n) values (?) /* ${randomBytes(6).toString('hex')} */`;
        const outcomes = await Promise.all(
          lanes.flatMap((lane) =>
            Array.from({ length: perLane }, (_, i) => {
              const n = ++next;
              return lane.submit(i === 0 ? (tx) => tx.get('select 1 / (? - 1) as x', [1]) : (tx) => tx.run(insert, [n]), one).then(
                () => 'ok',
                (e: { code?: string }) => e.code ?? String(e),
              );
            }),
          ),
        );
        assert.deepEqual(
          outcomes.filter((o) => o !== 'ok'),
          ['22012', '22012'],
          `round ${round}`,
        );
      }
      const rows = await sql<{ n: number; c: number }>`select count(*)::int as c, count(distinct n)::int as n from two_lanes`.execute(s.db);
      assert.deepEqual(rows.rows[0], { c: 3 * 2 * (perLane - 1), n: 3 * 2 * (perLane - 1) });
      assert.ok(refused.includes('25P02'), `driven: a first Parse refused in an aborted transaction (${[...new Set(refused)].join(', ')})`);
      assert.deepEqual(
        refused.filter((code) => code === '26000' || code === '42P05'),
        [],
      );
    } finally {
      await pool.end();
    }
  });
});
