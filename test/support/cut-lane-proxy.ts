import { createRequire } from 'node:module';
import { type AddressInfo, connect, createServer } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { generateKey, insertKey } from '../../src/keys/api-keys.ts';
import type PgModule from 'pg';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { PostgresGroupCommit } from '../../src/storage/postgres-group-commit.ts';
import type { Database } from '../../src/storage/schema.ts';
import { freshDatabaseUrl } from './engines.ts';
import { fundedWallet } from './ledger.ts';

const pg = createRequire(import.meta.url)('pg') as typeof PgModule;

/**
 * A lane on its own pool whose first connection runs through a loopback proxy that forwards every byte the
 * lane writes but, of the server's answers, only the first `answerBytes`, or those before the lane's
 * `commitsSent`-th COMMIT went out: then the lane's side is destroyed (the lane hears a lost connection) while
 * the server's side is closed gently, so the server runs and commits everything the lane wrote before the cut.
 * What committed unanswered is exactly what an unknown outcome is for.
 */
export async function laneCutProxy(url: string, db: Kysely<Database>, at: { answerBytes: number } | { commitsSent: number }) {
  const answerBytes = 'answerBytes' in at ? at.answerBytes : Number.POSITIVE_INFINITY;
  const upstream = new URL(url);
  const state = { cut: false, connections: 0 };
  const proxy = createServer((lane) => {
    const server = connect(Number(upstream.port), upstream.hostname);
    lane.on('error', () => undefined);
    server.on('error', () => undefined);
    lane.pipe(server);
    if (++state.connections > 1) return void server.pipe(lane);
    const cut = () => {
      state.cut = true;
      lane.destroy();
      lane.unpipe(server);
      server.end();
    };
    let answered = 0;
    server.on('data', (chunk: Buffer) => {
      if (state.cut) return;
      if (answered + chunk.length < answerBytes) {
        answered += chunk.length;
        lane.write(chunk);
        return;
      }
      lane.write(chunk.subarray(0, answerBytes - answered));
      cut();
    });
    let commits = 0;
    // After the pipe's own listener: the chunk holding the COMMIT has reached the server's side.
    lane.on('data', (chunk: Buffer) => {
      if (state.cut || !('commitsSent' in at)) return;
      commits += chunk.toString('latin1').split('COMMIT\0').length - 1;
      if (commits >= at.commitsSent) cut();
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(url);
  proxied.port = String((proxy.address() as AddressInfo).port);
  const pool = new pg.Pool({ connectionString: proxied.toString(), max: 1, pipeline: true } as PgModule.PoolConfig);
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  const lane = new PostgresGroupCommit(pool);
  const storage: Storage = { db, engine: 'postgres', writeUnit: lane.submit, close: () => pool.end() };
  const close = async () => {
    await pool.end().catch(() => undefined);
    proxy.close();
  };
  return { storage, state, close };
}

/** A fresh, migrated PostgreSQL ledger whose API key 1 has no spend limit (the lane-cut tests' reserves name it). */
export async function ledgerWithUnlimitedKey(): Promise<{ url: string; s: Storage }> {
  const url = await freshDatabaseUrl('postgres');
  const s = openStorage(url);
  await migrateToLatest(s);
  await insertKey(s.db, await fundedWallet(s.db, 1), generateKey(randomBytes(32)), 'key 1, unlimited');
  return { url, s };
}
