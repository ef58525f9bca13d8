import type { Kysely } from 'kysely';

/**
 * Stored Responses: a `POST /v1/responses` with `store` true (OpenAI's default) keeps
 * the Response it answered, under the API key that asked (and its wallet), until `expires_at`, so that a
 * later request can continue it (`previous_response_id`) or cite its output items
 * (`item_reference`) and `GET`/`DELETE /v1/responses/{id}` work.
 * - `stored_responses`: one row per response. `input_json` holds the input items the response was
 *   produced from, references already resolved (OpenAI's `previous_response_id` prepends them with
 *   the output); `response_json` is the Response object as it was delivered. `bytes` is all the
 *   response keeps (the two plus its items' `item_json`), for the per-response and per-wallet bounds.
 *   The row is readable only with the API key that stored it (`api_key_id`), within its wallet.
 * - `stored_response_items`: one row per output item, holding the item itself (`item_json`) and its
 *   UTF-8 size (`bytes`), so an `item_reference` reads only the items it names: their sizes first,
 *   to bound the expanded request before any JSON is loaded (src/stored-responses/resolve.ts), then
 *   their JSON, never the whole `response_json`.
 * Not money: nothing here is written by the ledger, and a row is kept only after its request was billed.
 */
export function storedResponses() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('stored_responses')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('api_key_id', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('bytes', 'bigint', (c) => c.notNull())
        .addColumn('input_json', 'text', (c) => c.notNull())
        .addColumn('response_json', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('stored_responses_wallet').on('stored_responses').columns(['wallet', 'expires_at']).execute();
      await db.schema.createIndex('stored_responses_expires').on('stored_responses').column('expires_at').execute();
      await db.schema
        .createTable('stored_response_items')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('response_id', 'text', (c) => c.notNull())
        .addColumn('output_index', 'integer', (c) => c.notNull())
        .addColumn('bytes', 'bigint', (c) => c.notNull())
        .addColumn('item_json', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('stored_response_items_response').on('stored_response_items').column('response_id').execute();
    },
  };
}
