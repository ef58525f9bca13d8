import { openStorage, type Storage } from '../../src/storage/database.ts';

/**
 * The database stops answering on demand: on PostgreSQL the connection is cut (a TCP relay closed
 * under the storage); on SQLite another connection holds the write lock past the busy timeout.
 */
export async function databaseOutage(s: Storage, url: string): Promise<{ storage: Storage; start: () => Promise<void>; end: () => Promise<void> }> {
  if (s.engine === 'postgres') {
    const { tcpRelay } = await import('../support/tcp-relay.ts');
    const target = new URL(url);
    const relay = await tcpRelay(Number(target.port));
    await relay.open();
    target.port = String(relay.port);
    const storage = openStorage(target.toString());
    return { storage, start: () => relay.close(), end: () => storage.close().catch(() => undefined) };
  }
  const { default: Sqlite } = await import('better-sqlite3');
  const holder = new Sqlite(url.slice('sqlite:'.length));
  return {
    storage: s,
    start: async () => {
      holder.exec('BEGIN IMMEDIATE');
    },
    end: async () => {
      holder.exec('ROLLBACK');
      holder.close();
    },
  };
}
