import type { Kysely } from 'kysely';
import { ApiError, badRequest } from '../refusal.ts';
import type { Database } from '../storage/schema.ts';
import { findItems, findResponse } from './store.ts';

/**
 * A Responses request's references to stored responses, resolved against the key's wallet before
 * anything is planned: `previous_response_id` prepends that response's input and output items
 * (OpenAI's semantics; its instructions are not carried over), and each `item_reference` in
 * `input` becomes the stored item it names. The request that goes on to be decoded, bounded and
 * reserved is the whole conversation, so the reservation's prompt bound counts every referenced
 * item exactly as if the client had sent it.
 *
 * A reference the wallet cannot read (missing, expired, deleted, never stored, another wallet's)
 * is one 404 with one wording, whichever it is.
 */

export interface ResolvedRequest {
  /** The body with references replaced by what they name; `previous_response_id` removed. */
  body: unknown;
  /** The input items of this request after resolution: what a stored copy of its answer keeps. */
  input: unknown[];
}

const GONE = 'is not a stored response of this wallet (it may never have been stored, been deleted, or expired)';

export async function resolveStoredReferences(db: Kysely<Database>, wallet: string, body: unknown, now: number): Promise<ResolvedRequest> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { body, input: [] };
  const b = body as Record<string, unknown>;
  const prev = b.previous_response_id;
  let prefix: unknown[] = [];
  if (prev !== undefined && prev !== null) {
    if (typeof prev !== 'string' || prev === '') throw badRequest('previous_response_id must be the id of a stored response, such as "resp_…"', { param: 'previous_response_id' });
    const stored = await findResponse(db, wallet, prev, now);
    if (!stored) throw notFound(`previous_response_id ${quoted(prev)} ${GONE}; send the whole conversation in input instead`, 'previous_response_id');
    prefix = [...stored.input, ...stored.response.output];
  }

  const given = typeof b.input === 'string' ? [{ role: 'user', content: b.input }] : Array.isArray(b.input) ? b.input : null;
  // An input that is neither is left as it is, for the decoder's own refusal ("input is required"),
  // not the one for an unresolved previous_response_id.
  if (given === null) {
    const out: Record<string, unknown> = { ...b };
    delete out.previous_response_id;
    return { body: out, input: [] };
  }
  const references = given.flatMap((item, i) => (isReference(item) ? [{ i, id: (item as { id?: unknown }).id }] : []));
  for (const r of references) {
    if (typeof r.id !== 'string' || r.id === '') throw badRequest(`input[${r.i}].id must be the id of a stored item, such as "msg_…"`, { param: `input[${r.i}].id` });
  }
  const found = await findItems(db, wallet, references.map((r) => r.id as string), now);
  const input = given.map((item, i) => {
    if (!isReference(item)) return item;
    const id = (item as { id: string }).id;
    const stored = found.get(id);
    if (stored === undefined) throw notFound(`input[${i}] is an item_reference to ${quoted(id)}, which ${GONE}; send the item itself instead`, `input[${i}]`);
    return stored;
  });
  const out: Record<string, unknown> = { ...b, input: [...prefix, ...input] };
  delete out.previous_response_id;
  return { body: out, input: [...prefix, ...input] };
}

const isReference = (item: unknown) => typeof item === 'object' && item !== null && (item as { type?: unknown }).type === 'item_reference';

const quoted = (id: string) => JSON.stringify(id.slice(0, 80));

const notFound = (message: string, param: string) => new ApiError(404, 'NOT_FOUND', message, { param });
