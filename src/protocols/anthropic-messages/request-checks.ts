import { badRequest } from '../../refusal.ts';
import { CountableContent, readBlocks } from './countable-blocks.ts';

type Json = Record<string, any>;

/** The keys a message may have: output_config is checked by checkFieldValues (field-policy.ts). */
const MESSAGE_KEYS: ReadonlySet<string> = new Set(['role', 'content', 'output_config']);

/**
 * The shape every Messages request must have before it is planned, as Anthropic checks it:
 * `max_tokens` is required (Anthropic has no default; `count_tokens` passes `needsMaxTokens: false`),
 * roles are user, assistant, or system for a mid-conversation system message (the current Messages
 * API's SystemMessageParam: Claude Code sends its environment block so), and content is a string or
 * an array of typed blocks (text only in a system message and in `system`), each block's string
 * fields strings (readBlocks: the counts, the estimate and the translation read them as text).
 */
export function checkMessagesRequest(body: unknown, needsMaxTokens = true): Json {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('request body must be a JSON object', { param: 'body' });
  const b = body as Json;
  if (typeof b.model !== 'string' || !b.model)
    throw badRequest('model: Field required; send a model id such as "anthropic/claude-sonnet-4" (GET /v1/models lists them)', { param: 'model' });
  if (needsMaxTokens && (b.max_tokens === undefined || b.max_tokens === null))
    throw badRequest('max_tokens: Field required; the Messages API has no default output limit', { param: 'max_tokens' });
  if (b.max_tokens !== undefined && (!Number.isInteger(b.max_tokens) || b.max_tokens < 1))
    throw badRequest('max_tokens must be a positive whole number', { param: 'max_tokens' });
  if (!Array.isArray(b.messages) || b.messages.length === 0) throw badRequest('messages: at least one message is required', { param: 'messages' });
  b.messages.forEach((m: unknown, i: number) => {
    const msg = (m ?? {}) as Json;
    // A message's own keys are checked like the request's: anything else (cache_control with its
    // own ttl, speed, service_tier, …) would reach Anthropic unpriced and unchecked.
    for (const key of Object.keys(msg)) {
      if (!MESSAGE_KEYS.has(key))
        throw badRequest(`messages[${i}].${key.slice(0, 100)} is not accepted: a message carries role, content and output_config only on this gateway`, {
          param: `messages[${i}].${key.slice(0, 100)}`,
        });
    }
    if (msg.role !== 'user' && msg.role !== 'assistant' && msg.role !== 'system')
      throw badRequest(`messages[${i}].role must be "user", "assistant" or "system"`, { param: `messages[${i}].role` });
    const ok =
      typeof msg.content === 'string' || (Array.isArray(msg.content) && msg.content.every((c: unknown) => typeof (c as Json | null)?.type === 'string'));
    if (ok && msg.role === 'system' && Array.isArray(msg.content) && !msg.content.every((c: Json) => c.type === 'text' && typeof c.text === 'string')) {
      throw badRequest(`messages[${i}] is a system message; its content must be a string or text blocks`, { param: `messages[${i}].content` });
    }
    if (!ok)
      throw badRequest(`messages[${i}].content must be a string or an array of blocks such as {"type": "text", "text": "…"}`, {
        param: `messages[${i}].content`,
      });
    readBlocks(msg.content, `messages[${i}].content`, new CountableContent());
  });
  checkSystem(b.system);
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw badRequest('stream must be true or false', { param: 'stream' });
  return b;
}

/** `system`: a string or text blocks, as Anthropic takes it. */
function checkSystem(system: unknown): void {
  if (system === undefined || system === null || typeof system === 'string') return;
  if (!Array.isArray(system) || !system.every((s) => s?.type === 'text')) {
    throw badRequest('system must be a string or an array of {"type": "text", "text": "…"} blocks', { param: 'system' });
  }
  readBlocks(system, 'system', new CountableContent());
}

export { checkFieldValues, refusePricedFields } from './field-policy.ts';
