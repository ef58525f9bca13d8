import { badRequest } from '../../refusal.ts';

type Json = Record<string, any>;

/**
 * Fields of Anthropic's Messages API billed beyond input and output tokens, which the catalog has
 * no price for: refused whichever provider serves the model.
 */
const PRICED_FIELDS: Readonly<Record<string, string>> = {
  container: 'runs a code-execution container, billed by the hour on top of tokens',
  mcp_servers: 'calls remote MCP servers through the provider, whose tool calls are billed on top of tokens',
};

/**
 * The shape every Messages request must have before it is planned, as Anthropic checks it:
 * `max_tokens` is required (Anthropic has no default), roles alternate between user and assistant,
 * content is a string or an array of typed blocks.
 */
export function checkMessagesRequest(body: unknown): Json {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('request body must be a JSON object', { param: 'body' });
  const b = body as Json;
  if (typeof b.model !== 'string' || !b.model) throw badRequest('model: Field required; send a model id such as "anthropic/claude-sonnet-4" (GET /v1/models lists them)', { param: 'model' });
  if (b.max_tokens === undefined || b.max_tokens === null) throw badRequest('max_tokens: Field required; the Messages API has no default output limit', { param: 'max_tokens' });
  if (!Number.isInteger(b.max_tokens) || b.max_tokens < 1) throw badRequest('max_tokens must be a positive whole number', { param: 'max_tokens' });
  if (!Array.isArray(b.messages) || b.messages.length === 0) throw badRequest('messages: at least one message is required', { param: 'messages' });
  b.messages.forEach((m: unknown, i: number) => {
    const msg = (m ?? {}) as Json;
    if (msg.role !== 'user' && msg.role !== 'assistant') throw badRequest(`messages[${i}].role must be "user" or "assistant"; the system prompt goes in the top-level system field`, { param: `messages[${i}].role` });
    const ok = typeof msg.content === 'string' || (Array.isArray(msg.content) && msg.content.every((c: unknown) => typeof (c as Json | null)?.type === 'string'));
    if (!ok) throw badRequest(`messages[${i}].content must be a string or an array of blocks such as {"type": "text", "text": "…"}`, { param: `messages[${i}].content` });
  });
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw badRequest('stream must be true or false', { param: 'stream' });
  return b;
}

/** Refuses the fields priced beyond tokens, naming the first. */
export function refusePricedExtras(b: Json): void {
  for (const field of Object.keys(b)) {
    if (Object.hasOwn(PRICED_FIELDS, field)) throw badRequest(`${field} is refused: it ${PRICED_FIELDS[field]}; remove it from the request`, { param: field });
  }
}

/** "auto" and "standard_only" ask for nothing dearer than the standard price; other tiers are refused. */
export function checkServiceTier(value: unknown): void {
  if (value !== undefined && value !== null && value !== 'auto' && value !== 'standard_only') {
    throw badRequest('service_tier may only be "auto" or "standard_only" here; leave it out', { param: 'service_tier' });
  }
}
