import type { Kysely } from 'kysely';
import { ApiError, badRequest } from '../refusal.ts';
import type { Database } from '../storage/schema.ts';
import { findItems, findResponse, itemSizes, responseSize, type Owner } from './store.ts';

/**
 * A Responses request's references to stored responses, resolved against the key that sent it
 * before anything is planned: `previous_response_id` prepends that response's input and output
 * items (OpenAI's semantics; its instructions are not carried over), and each `item_reference` in
 * `input` becomes the stored item it names. The request that goes on to be decoded, bounded and
 * reserved is the whole conversation, so the reservation's prompt bound counts every referenced
 * item exactly as if the client had sent it.
 *
 * A reference the key cannot read (missing, expired, deleted, never stored, stored with another
 * key, another wallet's, or not an id the gateway makes) is one 404 with one wording, whichever it
 * is; an id not in the encoder's shape never reaches a query (store.ts).
 *
 * The expansion is bounded like a body sent whole: one stored item may be referenced thousands of
 * times (each reference is ~60 bytes, the item up to maxBytesPerResponse), so before any stored JSON
 * is loaded the sizes of what the references name are read (stored beside each row, no JSON), and a
 * request that would expand past `maxBytes` (limits.chatBodyBytes) is a 413. Only then are the
 * referenced items (each from its own row) and the previous response loaded.
 */

export interface ResolvedRequest {
  /** The body with references replaced by what they name; `previous_response_id` removed. */
  body: unknown;
  /** The input items of this request after resolution: what a stored copy of its answer keeps. */
  input: unknown[];
}

export interface ExpansionBound {
  /** The UTF-8 size of the request body as received. */
  bodyBytes: number;
  /** limits.chatBodyBytes: the most a request may be, references expanded. */
  maxBytes: number;
}

const GONE = 'is not a stored response of this API key (it may never have been stored, been deleted, expired, or been stored with another key)';

export async function resolveStoredReferences(db: Kysely<Database>, owner: Owner, body: unknown, now: number, bound: ExpansionBound): Promise<ResolvedRequest> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { body, input: [] };
  const b = body as Record<string, unknown>;
  const prev = b.previous_response_id;
  let prevBytes = 0;
  if (prev !== undefined && prev !== null) {
    if (typeof prev !== 'string' || prev === '')
      throw badRequest('previous_response_id must be the id of a stored response, such as "resp_…"', { param: 'previous_response_id' });
    const size = await responseSize(db, owner, prev, now);
    if (size === null) throw prevGone(prev);
    prevBytes = size;
  }

  const given = typeof b.input === 'string' ? [{ role: 'user', content: b.input }] : Array.isArray(b.input) ? b.input : null;
  const references = (given ?? []).flatMap((item, i) => (isReference(item) ? [{ i, id: (item as { id?: unknown }).id }] : []));
  for (const r of references) {
    if (typeof r.id !== 'string' || r.id === '')
      throw badRequest(`input[${r.i}].id must be the id of a stored item, such as "msg_…"`, { param: `input[${r.i}].id` });
  }
  const ids = references.map((r) => r.id as string);
  const sizes = ids.length ? await itemSizes(db, owner, ids, now) : new Map<string, number>();
  let expanded = bound.bodyBytes + prevBytes;
  for (const r of references) {
    const size = sizes.get(r.id as string);
    if (size === undefined) throw itemGone(r.i, r.id as string);
    expanded += size;
  }
  if (expanded > bound.maxBytes) {
    throw new ApiError(
      413,
      'PAYLOAD_TOO_LARGE',
      `this request would expand to about ${expanded} bytes with the stored items it refers to (previous_response_id and item_reference), over the limit of ${bound.maxBytes} bytes (limits.chatBodyBytes) that a request sent whole is held to; refer to fewer stored items, or start a new conversation`,
      { param: references.length ? 'input' : 'previous_response_id', expanded_bytes: expanded, limit_bytes: bound.maxBytes },
    );
  }

  // An input that is neither a string nor a list is left as it is, for the decoder's own refusal
  // ("input is required"), not the one for an unresolved previous_response_id (checked above).
  if (given === null) {
    const out: Record<string, unknown> = { ...b };
    delete out.previous_response_id;
    return { body: out, input: [] };
  }
  let prefix: unknown[] = [];
  if (typeof prev === 'string') {
    // Deleted or expired since its size was read: the same 404.
    const stored = await findResponse(db, owner, prev, now);
    if (!stored) throw prevGone(prev);
    prefix = [...stored.input, ...stored.response.output];
  }
  const found = ids.length ? await findItems(db, owner, ids, now) : new Map<string, unknown>();
  const input = given.map((item, i) => {
    if (!isReference(item)) return item;
    const id = (item as { id: string }).id;
    const stored = found.get(id);
    if (stored === undefined) throw itemGone(i, id);
    return stored;
  });
  const out: Record<string, unknown> = { ...b, input: [...prefix, ...input] };
  delete out.previous_response_id;
  return { body: out, input: [...prefix, ...input] };
}

const isReference = (item: unknown) => typeof item === 'object' && item !== null && (item as { type?: unknown }).type === 'item_reference';

const quoted = (id: string) => JSON.stringify(id.slice(0, 80));

const notFound = (message: string, param: string) => new ApiError(404, 'NOT_FOUND', message, { param });
const prevGone = (id: string) => notFound(`previous_response_id ${quoted(id)} ${GONE}; send the whole conversation in input instead`, 'previous_response_id');
const itemGone = (i: number, id: string) =>
  notFound(`input[${i}] is an item_reference to ${quoted(id)}, which ${GONE}; send the item itself instead`, `input[${i}]`);
