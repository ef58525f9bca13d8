import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

/**
 * The stored-responses tables (migration 009). Every read takes the wallet and the time: a row of
 * another wallet, an expired row and a missing row are the same `null`, so no caller can tell them
 * apart (and neither can a client: each is the same 404).
 */

export interface StoredResponse {
  id: string;
  /** The input items the response was produced from, references resolved. */
  input: unknown[];
  /** The Response object as it was delivered. */
  response: Record<string, unknown> & { output: unknown[] };
}

export interface NewStoredResponse extends StoredResponse {
  wallet: string;
  apiKeyId: number;
  now: number;
  expiresAt: number;
}

export interface WalletHolding {
  count: number;
  bytes: number;
}

/** The serialised row's size: what the per-response and per-wallet bounds count. */
export function storedBytes(input: unknown[], response: unknown): { inputJson: string; responseJson: string; bytes: number } {
  const inputJson = JSON.stringify(input);
  const responseJson = JSON.stringify(response);
  return { inputJson, responseJson, bytes: Buffer.byteLength(inputJson) + Buffer.byteLength(responseJson) };
}

/** How many live responses the wallet keeps, and their bytes. */
export async function walletHolding(db: Kysely<Database>, wallet: string, now: number): Promise<WalletHolding> {
  const row = await db
    .selectFrom('stored_responses')
    .select((eb) => [eb.fn.countAll<number>().as('count'), eb.fn.sum<number>('bytes').as('bytes')])
    .where('wallet', '=', wallet)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return { count: Number(row?.count ?? 0), bytes: Number(row?.bytes ?? 0) };
}

/** Keeps a response and indexes its output items by id, in one transaction. */
export async function saveResponse(db: Kysely<Database>, r: NewStoredResponse): Promise<void> {
  const { inputJson, responseJson, bytes } = storedBytes(r.input, r.response);
  const items = r.response.output.flatMap((item, i) => {
    const id = (item as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? [{ id, response_id: r.id, output_index: i }] : [];
  });
  await db.transaction().execute(async (tx) => {
    await tx
      .insertInto('stored_responses')
      .values({ id: r.id, wallet: r.wallet, api_key_id: r.apiKeyId, created_at: r.now, expires_at: r.expiresAt, bytes, input_json: inputJson, response_json: responseJson })
      .execute();
    if (items.length) await tx.insertInto('stored_response_items').values(items).execute();
  });
}

/** The wallet's live response `id`, or null (missing, expired, deleted or another wallet's alike). */
export async function findResponse(db: Kysely<Database>, wallet: string, id: string, now: number): Promise<StoredResponse | null> {
  const row = await db
    .selectFrom('stored_responses')
    .select(['input_json', 'response_json'])
    .where('id', '=', id)
    .where('wallet', '=', wallet)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return row ? { id, input: JSON.parse(row.input_json), response: JSON.parse(row.response_json) } : null;
}

/** The wallet's live output items among `ids`, by id; an id not returned is not the wallet's to read. */
export async function findItems(db: Kysely<Database>, wallet: string, ids: string[], now: number): Promise<Map<string, unknown>> {
  const found = new Map<string, unknown>();
  if (!ids.length) return found;
  const rows = await db
    .selectFrom('stored_response_items as i')
    .innerJoin('stored_responses as r', 'r.id', 'i.response_id')
    .select(['i.id', 'i.output_index', 'r.id as response_id', 'r.response_json'])
    .where('i.id', 'in', [...new Set(ids)])
    .where('r.wallet', '=', wallet)
    .where('r.expires_at', '>', now)
    .execute();
  const parsed = new Map<string, { output: unknown[] }>();
  for (const row of rows) {
    let response = parsed.get(row.response_id);
    if (!response) parsed.set(row.response_id, (response = JSON.parse(row.response_json) as { output: unknown[] }));
    const item = response.output[row.output_index];
    if (item !== undefined) found.set(row.id, item);
  }
  return found;
}

/** Deletes the wallet's live response `id`; false when there was none to delete (two deletes at once: one true). */
export async function deleteResponse(db: Kysely<Database>, wallet: string, id: string, now: number): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    const result = await tx.deleteFrom('stored_responses').where('id', '=', id).where('wallet', '=', wallet).where('expires_at', '>', now).executeTakeFirst();
    if (Number(result.numDeletedRows ?? 0) !== 1) return false;
    await tx.deleteFrom('stored_response_items').where('response_id', '=', id).execute();
    return true;
  });
}

/** Removes expired responses and their items, at most `batch` a call; returns how many went. */
export async function pruneExpiredResponses(db: Kysely<Database>, now: number, batch = 500): Promise<number> {
  const ids = (await db.selectFrom('stored_responses').select('id').where('expires_at', '<=', now).limit(batch).execute()).map((r) => r.id);
  if (!ids.length) return 0;
  await db.transaction().execute(async (tx) => {
    await tx.deleteFrom('stored_response_items').where('response_id', 'in', ids).execute();
    await tx.deleteFrom('stored_responses').where('id', 'in', ids).where('expires_at', '<=', now).execute();
  });
  return ids.length;
}
