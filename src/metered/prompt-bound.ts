import { badRequest } from '../refusal.ts';
import type { CatalogModel, PartKind } from '../providers/catalog.ts';

/** Content part types that carry text, counted by their bytes like the rest of the body. */
const TEXT_PARTS = new Set(['text', 'refusal']);
/** OpenAI's non-text part types, by the input kind a model declares to accept them. */
const PART_KINDS: Record<string, { kind: PartKind; named: string; noun: string }> = {
  image_url: { kind: 'image', named: 'an image_url part', noun: 'images' },
  input_audio: { kind: 'audio', named: 'an input_audio part', noun: 'audio' },
  file: { kind: 'file', named: 'a file part', noun: 'files' },
};

/** The non-text parts of a request's messages, as the reservation and the estimate count them. */
export interface NonTextParts {
  /** Sum of the declared per-part token bounds. */
  tokens: number;
  /** Their UTF-8 size inside the body, replaced by `tokens` in the bound (an image's bytes are not its price). */
  bytes: number;
}

/**
 * Checks every message's content and prices its non-text parts. A part the model does not declare,
 * or of a type this gateway does not know, is a 400 naming it: the reservation has no bound for it.
 */
export function measureParts(messages: unknown[], model: CatalogModel): NonTextParts {
  const parts: NonTextParts = { tokens: 0, bytes: 0 };
  messages.forEach((m, i) => {
    const content = (m as { content?: unknown }).content;
    if (content === undefined || content === null || typeof content === 'string') return;
    if (!Array.isArray(content)) throw badRequest(`messages[${i}].content must be a string or an array of content parts`, { param: `messages[${i}].content` });
    content.forEach((part, j) => {
      const where = `messages[${i}].content[${j}]`;
      const type = (part as { type?: unknown } | null)?.type;
      if (typeof type !== 'string') throw badRequest(`${where} must be an object with a string type, such as {"type": "text", "text": "…"}`, { param: where });
      if (TEXT_PARTS.has(type)) return;
      // hasOwn: a part typed "constructor" or "__proto__" is an unknown type, not Object's prototype.
      const known = Object.hasOwn(PART_KINDS, type) ? PART_KINDS[type] : undefined;
      if (!known)
        throw badRequest(`${where} is a ${JSON.stringify(type.slice(0, 50))} part, which this gateway does not accept; send text parts`, { param: where });
      const bound = model.partTokenBounds[known.kind];
      if (bound === undefined)
        throw badRequest(
          `${where} is ${known.named}; model ${model.id} does not accept ${known.noun}; send text only, or use a model whose inputs list ${known.kind}`,
          { param: where },
        );
      parts.tokens += bound;
      parts.bytes += Buffer.byteLength(JSON.stringify(part));
    });
  });
  return parts;
}

/** Chat-template tokens around each message, each tool definition and the whole prompt. */
const PER_MESSAGE = 8;
const PER_TOOL = 32;
const PER_REQUEST = 64;

/**
 * An upper bound on the prompt tokens the provider can bill for `upstreamBody` as it is sent
 * (`upstreamJson`, its serialisation, the very bytes that go upstream),
 * computed without a tokenizer. Every forwarded field is counted (messages in every form, tools,
 * functions, response_format schemas, tool_choice, provider extensions), not a chosen few: a
 * provider renders them into the prompt and bills them. The count is the body's UTF-8 size, since
 * no token is shorter than one byte and JSON only adds bytes (quotes, escapes) to what a provider
 * renders; plus the chat template's own tokens; with each declared non-text part at its bound
 * instead of its bytes.
 *
 * It is capped at the model's context length, which is still a true bound: providers refuse a
 * prompt longer than the context window (and bill nothing for the refusal). This relies on
 * `contextLength` not being configured below the provider's real window.
 */
export function promptBound(upstreamBody: Record<string, unknown>, upstreamJson: string, model: CatalogModel, parts: NonTextParts): number {
  const bodyBytes = Buffer.byteLength(upstreamJson);
  const bound = bodyBytes - parts.bytes + parts.tokens + templateTokens(upstreamBody);
  return Math.min(bound, model.contextLength);
}

/** The chat template's tokens around the body's messages, tool definitions and the whole prompt, beside their text. */
export function templateTokens(upstreamBody: Record<string, unknown>): number {
  const messages = Array.isArray(upstreamBody.messages) ? upstreamBody.messages.length : 0;
  const tools = countOf(upstreamBody.tools) + countOf(upstreamBody.functions);
  return PER_MESSAGE * messages + PER_TOOL * tools + PER_REQUEST;
}

const countOf = (v: unknown): number => (Array.isArray(v) ? v.length : 0);
