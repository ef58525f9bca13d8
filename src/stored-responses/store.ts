import { performance } from 'node:perf_hooks';
import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

/**
 * The stored-responses tables (migration 009). Every read takes the owner (the API key that stored
 * the response, and its wallet) and the time: a row of another key, of another wallet, an expired
 * row, a missing row and an id that is not one the encoder makes are the same `null`, so no caller
 * can tell them apart (and neither can a client: each is the same 404).
 *
 * Ids are checked against the encoder's shape (newId in protocols/openai-responses/encode-answer.ts:
 * a prefix and 16 random bytes in hex) before any query: anything else (a NUL byte PostgreSQL would
 * refuse with an error, 200 KB of text, another case) is answered "not found" without touching the
 * database.
 */

/** Who may read a stored response: the key that stored it. The wallet is checked too (defence in depth). */
export interface Owner {
  wallet: string;
  apiKeyId: number;
}

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

/** A response id as the encoder makes it (`resp_` and 32 lowercase hex digits). */
export const isResponseId = (id: unknown): id is string => typeof id === 'string' && /^resp_[0-9a-f]{32}$/.test(id);
/** An output item id as the encoder makes it (`msg_` or `fc_` and 32 lowercase hex digits). */
export const isItemId = (id: unknown): id is string => typeof id === 'string' && /^(msg|fc)_[0-9a-f]{32}$/.test(id);

export interface StoredRow {
  inputJson: string;
  responseJson: string;
  /** The output items kept one by one, for item_reference: each with its JSON and that JSON's size. */
  items: { id: string; outputIndex: number; json: string; bytes: number }[];
  /** Everything the row and its items keep: what the per-response and per-wallet bounds count. */
  bytes: number;
}

/** The serialised rows of a response: its input, the Response, and a copy of each output item that has an id. */
export function storedRow(input: unknown[], response: { output: unknown[] }): StoredRow {
  const inputJson = JSON.stringify(input);
  const responseJson = JSON.stringify(response);
  const items = response.output.flatMap((item, outputIndex) => {
    const id = (item as { id?: unknown } | null)?.id;
    if (typeof id !== 'string') return [];
    const json = JSON.stringify(item);
    return [{ id, outputIndex, json, bytes: Buffer.byteLength(json) }];
  });
  const bytes = Buffer.byteLength(inputJson) + Buffer.byteLength(responseJson) + items.reduce((n, i) => n + i.bytes, 0);
  return { inputJson, responseJson, items, bytes };
}

/** How many live responses the wallet keeps, and their bytes (items included). */
export async function walletHolding(db: Kysely<Database>, wallet: string, now: number): Promise<WalletHolding> {
  const row = await db
    .selectFrom('stored_responses')
    .select((eb) => [eb.fn.countAll<number>().as('count'), eb.fn.sum<number>('bytes').as('bytes')])
    .where('wallet', '=', wallet)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return { count: Number(row?.count ?? 0), bytes: Number(row?.bytes ?? 0) };
}

/** Keeps a response and a copy of each of its output items, in one transaction. */
export async function saveResponse(db: Kysely<Database>, r: NewStoredResponse, row: StoredRow = storedRow(r.input, r.response)): Promise<void> {
  await db.transaction().execute(async (tx) => {
    await tx
      .insertInto('stored_responses')
      .values({
        id: r.id,
        wallet: r.wallet,
        api_key_id: r.apiKeyId,
        created_at: r.now,
        expires_at: r.expiresAt,
        bytes: row.bytes,
        input_json: row.inputJson,
        response_json: row.responseJson,
      })
      .execute();
    if (row.items.length) {
      await tx
        .insertInto('stored_response_items')
        .values(row.items.map((i) => ({ id: i.id, response_id: r.id, output_index: i.outputIndex, bytes: i.bytes, item_json: i.json })))
        .execute();
    }
  });
}

/** The owner's live response `id`, or null (missing, expired, deleted, another key's or not an id alike). */
export async function findResponse(db: Kysely<Database>, owner: Owner, id: string, now: number): Promise<StoredResponse | null> {
  if (!isResponseId(id)) return null;
  const row = await db
    .selectFrom('stored_responses')
    .select(['input_json', 'response_json'])
    .where('id', '=', id)
    .where('api_key_id', '=', owner.apiKeyId)
    .where('wallet', '=', owner.wallet)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return row ? { id, input: JSON.parse(row.input_json), response: JSON.parse(row.response_json) } : null;
}

/**
 * How many bytes continuing the owner's live response `id` adds to a request (its input and its
 * output items, as previous_response_id prepends them), without loading any of it; null as findResponse.
 * The row's `bytes` less its items' copies: the input and the Response, which hold the output once.
 */
export async function responseSize(db: Kysely<Database>, owner: Owner, id: string, now: number): Promise<number | null> {
  if (!isResponseId(id)) return null;
  const row = await db
    .selectFrom('stored_responses as r')
    .select((eb) => [
      'r.bytes',
      eb
        .selectFrom('stored_response_items as i')
        .whereRef('i.response_id', '=', 'r.id')
        .select((e) => e.fn.coalesce(e.fn.sum<number>('i.bytes'), e.lit(0)).as('s'))
        .as('item_bytes'),
    ])
    .where('r.id', '=', id)
    .where('r.api_key_id', '=', owner.apiKeyId)
    .where('r.wallet', '=', owner.wallet)
    .where('r.expires_at', '>', now)
    .executeTakeFirst();
  return row ? Number(row.bytes) - Number(row.item_bytes ?? 0) : null;
}

/** The sizes of the owner's live output items among `ids`, by id (no JSON read); an id not returned is not the owner's to read. */
export async function itemSizes(db: Kysely<Database>, owner: Owner, ids: string[], now: number): Promise<Map<string, number>> {
  const valid = validItemIds(ids);
  if (!valid.length) return new Map();
  const rows = await itemsQuery(db, owner, valid, now).select(['i.id', 'i.bytes']).execute();
  return new Map(rows.map((r) => [r.id, Number(r.bytes)]));
}

/** The owner's live output items among `ids`, by id, each parsed from its own row (never the whole Response). */
export async function findItems(db: Kysely<Database>, owner: Owner, ids: string[], now: number): Promise<Map<string, unknown>> {
  const valid = validItemIds(ids);
  if (!valid.length) return new Map();
  const rows = await itemsQuery(db, owner, valid, now).select(['i.id', 'i.item_json']).execute();
  return new Map(rows.map((r) => [r.id, JSON.parse(r.item_json) as unknown]));
}

const validItemIds = (ids: string[]) => [...new Set(ids.filter(isItemId))];

const itemsQuery = (db: Kysely<Database>, owner: Owner, ids: string[], now: number) =>
  db
    .selectFrom('stored_response_items as i')
    .innerJoin('stored_responses as r', 'r.id', 'i.response_id')
    .where('i.id', 'in', ids)
    .where('r.api_key_id', '=', owner.apiKeyId)
    .where('r.wallet', '=', owner.wallet)
    .where('r.expires_at', '>', now);

/** Deletes the owner's live response `id`; false when there was none to delete (two deletes at once: one true). */
export async function deleteResponse(db: Kysely<Database>, owner: Owner, id: string, now: number): Promise<boolean> {
  if (!isResponseId(id)) return false;
  return db.transaction().execute(async (tx) => {
    const result = await tx
      .deleteFrom('stored_responses')
      .where('id', '=', id)
      .where('api_key_id', '=', owner.apiKeyId)
      .where('wallet', '=', owner.wallet)
      .where('expires_at', '>', now)
      .executeTakeFirst();
    if (Number(result.numDeletedRows ?? 0) !== 1) return false;
    await tx.deleteFrom('stored_response_items').where('response_id', '=', id).execute();
    return true;
  });
}

/**
 * Deletes every response a key stored (and their items' copies), once the key is revoked: nothing can
 * read, continue or delete them any more (ownership is the key), so kept until they expired they only
 * filled the wallet's maxStoredPerWallet / maxBytesPerWallet, and no other key of the wallet could
 * make room. Returns how many went; a second call finds none.
 */
/** Whether the key was revoked: what a request still running under it answers is not stored (no one could reach it). */
export async function keyRevoked(db: Kysely<Database>, apiKeyId: number): Promise<boolean> {
  const key = await db.selectFrom('api_keys').select('revoked_at').where('id', '=', apiKeyId).executeTakeFirst();
  return key?.revoked_at != null;
}

export async function deleteKeyResponses(db: Kysely<Database>, owner: Owner): Promise<number> {
  return db.transaction().execute(async (tx) => {
    const ofKey = tx.selectFrom('stored_responses').select('id').where('api_key_id', '=', owner.apiKeyId).where('wallet', '=', owner.wallet);
    await tx.deleteFrom('stored_response_items').where('response_id', 'in', ofKey).execute();
    const result = await tx.deleteFrom('stored_responses').where('api_key_id', '=', owner.apiKeyId).where('wallet', '=', owner.wallet).executeTakeFirst();
    return Number(result.numDeletedRows ?? 0);
  });
}

export interface PruneOptions {
  /** Responses removed a transaction. */
  batch?: number;
  /** Once a pass has run this long it stops after the batch in hand; the next pass goes on. */
  budgetMs?: number;
}

/**
 * Removes expired responses and their items, a batch a transaction, until a batch comes back short
 * (nothing expired is left) or the pass has used its time budget; returns how many went. One pass a
 * minute therefore frees as many as the database can delete in the budget, so a gateway storing
 * faster than one batch a minute does not build a backlog without bound.
 */
export async function pruneExpiredResponses(db: Kysely<Database>, now: number, { batch = 500, budgetMs = 2_000 }: PruneOptions = {}): Promise<number> {
  const started = performance.now();
  let pruned = 0;
  for (;;) {
    const ids = (await db.selectFrom('stored_responses').select('id').where('expires_at', '<=', now).limit(batch).execute()).map((r) => r.id);
    if (ids.length) {
      await db.transaction().execute(async (tx) => {
        await tx.deleteFrom('stored_response_items').where('response_id', 'in', ids).execute();
        await tx.deleteFrom('stored_responses').where('id', 'in', ids).where('expires_at', '<=', now).execute();
      });
    }
    pruned += ids.length;
    if (ids.length < batch || performance.now() - started >= budgetMs) return pruned;
  }
}
