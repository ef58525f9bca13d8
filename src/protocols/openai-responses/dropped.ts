/**
 * What a Responses request may carry that the gateway accepts and does not pass on, because it is
 * price-neutral here and the answer stays one the client can use (OpenAI's Codex CLI sends all of it
 * on every turn). Each is named in the `x-tollgate-fields-dropped` response header, so a client can
 * see what was not done. The request is translated onto chat completions for every provider, so
 * nothing below could reach a provider anyway: the policy decides between dropping and refusing.
 *
 * - `include: ["reasoning.encrypted_content"]`: asks for the model's reasoning as an opaque item to
 *   send back on the next turn (how a client with `store: false` keeps it). Chat completions returns
 *   no such thing, so the answer carries no reasoning items; the reasoning is still billed, as the
 *   output tokens the provider reports. Other include values ask for tool results or logprobs this
 *   gateway does not produce and are refused by name (decode-request.ts).
 * - `client_metadata`: the client's own ids (session, turn), for OpenAI's logs; nothing reads them here.
 * - `tools` of type `web_search` (any version): OpenAI's hosted search, billed per call at the
 *   provider. It is never sent (a chat provider has no such tool, and the gateway has no price for
 *   it): the model answers without searching, as it does when the client offers no search.
 * - `tools` of type `namespace`: a group of the client's own function tools (Codex's sub-agent
 *   tools). Chat completions has no namespaces; the model works without them.
 * - `input` items of type `reasoning`: reasoning a Responses provider returned on an earlier turn,
 *   encrypted for that provider. A chat provider cannot read it, and it is not sent, so it is neither
 *   in the prompt bound nor billed.
 */

/** The include values accepted (and left unanswered). */
export const ACCEPTED_INCLUDES: ReadonlySet<string> = new Set(['reasoning.encrypted_content']);

/** Top-level fields accepted and not forwarded, beyond `include`. */
export const DROPPED_FIELDS: ReadonlySet<string> = new Set(['client_metadata']);

/** Tool types accepted and never sent. */
export const isDroppedToolType = (type: unknown): boolean => type === 'namespace' || (typeof type === 'string' && type.startsWith('web_search'));

/** Input item types accepted and never sent. */
export const DROPPED_ITEM_TYPES: ReadonlySet<string> = new Set(['reasoning']);

/** The header naming what was dropped. */
export const DROPPED_HEADER = 'x-tollgate-fields-dropped';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
/** Only names of a plain form are echoed into a header (a client's namespace name is its own text). */
const headerSafe = (name: unknown): name is string => typeof name === 'string' && /^[A-Za-z0-9._-]{1,64}$/.test(name);

/**
 * What of an (already decoded, so valid) request was dropped, as the header's entries: `include`,
 * `client_metadata`, `tools.<name or type>`, `input.reasoning`.
 */
export function droppedEntries(body: unknown): string[] {
  if (!isObject(body)) return [];
  const out: string[] = [];
  if (Array.isArray(body.include) && body.include.length > 0) out.push('include');
  for (const field of DROPPED_FIELDS) if (body[field] !== undefined && body[field] !== null) out.push(field);
  for (const tool of Array.isArray(body.tools) ? body.tools : []) {
    if (!isObject(tool) || !isDroppedToolType(tool.type)) continue;
    const name = tool.type === 'namespace' ? tool.name : tool.type;
    const entry = `tools.${headerSafe(name) ? name : String(tool.type)}`;
    if (!out.includes(entry)) out.push(entry);
  }
  for (const item of Array.isArray(body.input) ? body.input : []) {
    if (!isObject(item) || typeof item.type !== 'string' || !DROPPED_ITEM_TYPES.has(item.type)) continue;
    const entry = `input.${item.type}`;
    if (!out.includes(entry)) out.push(entry);
  }
  return out;
}

/** The response header for a request, or none when nothing was dropped. */
export function droppedHeaders(body: unknown): Record<string, string> {
  const entries = droppedEntries(body);
  return entries.length ? { [DROPPED_HEADER]: entries.join(',') } : {};
}
