import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

const SETTING = 'api_key_hmac_secret';

/**
 * The secret API keys are hashed with. An operator may set it through the environment; otherwise the
 * first instance to start generates one and stores it in the database, so that every instance
 * sharing the database (and every restart) hashes keys the same way. Whoever inserts first wins.
 */
export async function resolveKeySecret(db: Kysely<Database>, configured?: string): Promise<Buffer> {
  if (configured) return Buffer.from(configured, 'utf8');
  await db
    .insertInto('settings')
    .values({ key: SETTING, value: randomBytes(32).toString('hex') })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const row = await db.selectFrom('settings').select('value').where('key', '=', SETTING).executeTakeFirstOrThrow();
  return Buffer.from(row.value, 'hex');
}
