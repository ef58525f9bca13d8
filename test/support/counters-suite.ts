/** What the batch-counter attacks share: a migrated database per describe block, and API keys with a daily spend limit. */
import { randomBytes } from 'node:crypto';
import { after, before } from 'node:test';
import type { Kysely } from 'kysely';
import { generateKey, insertKey } from '../../src/keys/api-keys.ts';
import { type Engine, openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import type { Database } from '../../src/storage/schema.ts';
import { freshDatabaseUrl } from './engines.ts';

/** Sets a key's spend limit per UTC day, as the dashboard does. */
export const setDailyLimit = (db: Kysely<Database>, apiKeyId: number, limitUsdc: number) =>
  db.updateTable('api_keys').set({ spend_limit_usdc: limitUsdc, spend_limit_period: 'day' }).where('id', '=', apiKeyId).execute();

/** A new API key of `wallet`, with a daily spend limit unless `limitUsdc` is null; its id. */
export async function keyWithDailyLimit(db: Kysely<Database>, wallet: string, limitUsdc: number | null): Promise<number> {
  const key = await insertKey(db, wallet, generateKey(randomBytes(32)), 'review');
  if (limitUsdc !== null) await setDailyLimit(db, key.id, limitUsdc);
  return key.id;
}

/** A fresh migrated database of `engine` for the describe block it is called in: handed to `use` before its tests, closed after. */
export function migratedStorage(engine: Engine, use: (s: Storage) => void): void {
  let opened: Storage | undefined;
  before(async () => {
    opened = openStorage(await freshDatabaseUrl(engine));
    await migrateToLatest(opened);
    use(opened);
  });
  after(() => opened?.close());
}
