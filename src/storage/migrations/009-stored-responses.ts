import type { Kysely } from 'kysely';

/**
 * Stored Responses (issue 25 §3): a `POST /v1/responses` with `store` true (OpenAI's default) keeps
 * the Response it answered, under the wallet of the key that asked, until `expires_at`, so that a
 * later request can continue it (`previous_response_id`) or cite its output items
 * (`item_reference`) and `GET`/`DELETE /v1/responses/{id}` work.
 * - `stored_responses`: one row per response. `input_json` holds the input items the response was
 *   produced from, references already resolved (OpenAI's `previous_response_id` prepends them with
 *   the output); `response_json` is the Response object as it was delivered. `bytes` is the two
 *   together, for the per-wallet bound.
 * - `stored_response_items`: one row per output item, so an `item_reference` finds its response in
 *   one lookup by the item's id; the item itself is read from `response_json`.
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
        .execute();
      await db.schema.createIndex('stored_response_items_response').on('stored_response_items').column('response_id').execute();
    },
  };
}
