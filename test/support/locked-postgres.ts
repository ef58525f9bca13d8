import { after } from 'node:test';
import pg from 'pg';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { freshDatabaseUrl } from './engines.ts';
import { fundedWallet } from './ledger.ts';
import { until } from './until.ts';

/**
 * A fresh PostgreSQL ledger with one funded wallet, and an outside connection of its own: it holds
 * row locks to stop the ledger's writers at a chosen statement, and watches them wait. Both are
 * closed when the calling suite ends; call it inside a describe.
 */
export function lockedPostgresSuite(): () => Promise<{ s: Storage; outside: pg.Client; wallet: string; waitingOnLocks: (n: number) => Promise<void> }> {
  const opened: Storage[] = [];
  const outsiders: pg.Client[] = [];
  after(async () => {
    for (const c of outsiders) await c.end();
    for (const s of opened) await s.close();
  });
  return async () => {
    const url = await freshDatabaseUrl('postgres');
    const s = openStorage(url);
    opened.push(s);
    await migrateToLatest(s);
    const outside = new pg.Client({ connectionString: url });
    await outside.connect();
    outsiders.push(outside);
    const wallet = await fundedWallet(s.db, 10_000);
    /** Waits until `n` other sessions wait for a row lock. */
    const waitingOnLocks = (n: number) =>
      until(async () => {
        const { rows } = await outside.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()",
        );
        return rows[0].n >= n;
      }, `${n} sessions waiting for a row lock`);
    return { s, outside, wallet, waitingOnLocks };
  };
}
