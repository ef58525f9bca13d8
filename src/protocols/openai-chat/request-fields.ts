import { badRequest } from '../../refusal.ts';

/**
 * Which request fields reach the provider. A forwarded field is one the operator pays for, so the
 * list is closed: OpenAI's documented chat-completions fields whose effect on the bill is covered
 * by the reservation (prompt size, `n` × `max_tokens`, at the model's per-token prices), plus the
 * provider's configured `extraFields`. Anything else is a 400 naming it, as OpenAI itself answers
 * an unknown argument. docs/api.md "Forwarded fields" lists the same names.
 */

/** Fields that never carry prompt text: knobs, ids and limits. Everything else forwarded is input. */
export const CONTROL_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'max_tokens',
  'max_completion_tokens',
  'n',
  'stream',
  'stream_options',
  'temperature',
  'top_p',
  'stop',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'seed',
  'parallel_tool_calls',
  'user',
  'safety_identifier',
  'prompt_cache_key',
  'metadata',
  'verbosity',
  'reasoning_effort',
  'thinking',
  'service_tier',
  'modalities',
  'store',
]);

/** Fields that providers bill as prompt tokens (the reservation and the estimate count them). */
const INPUT_FIELDS = ['messages', 'tools', 'tool_choice', 'functions', 'function_call', 'response_format'];

/** Every field forwarded without an operator's say-so; the price-sensitive ones are checked by value below. */
const STANDARD_FIELDS: ReadonlySet<string> = new Set([...CONTROL_FIELDS, ...INPUT_FIELDS]);

/** A field of OpenAI's chat-completions request (another protocol's inbound translator must not let one through as its own). */
export const isStandardChatField = (name: string): boolean => STANDARD_FIELDS.has(name);

/**
 * Fields refused because they change what a token costs, or bill beyond `n` × `max_tokens`, and
 * the catalog has no price for that. The value says why, for the 400 and for the config check.
 */
export const PRICED_FIELDS: Readonly<Record<string, string>> = {
  audio: 'asks for audio output, which is billed at audio prices',
  web_search_options: 'turns on web search, which is billed per call on top of tokens',
  best_of: 'generates and bills candidates that are not returned',
  prediction: 'bills rejected prediction tokens as completion tokens, which the reservation cannot bound',
};

/** Values of otherwise standard fields that change the price or what the operator has agreed to. */
function refusedValue(field: string, value: unknown): string | null {
  if (field === 'service_tier' && value !== undefined && value !== null && value !== 'auto' && value !== 'default') {
    return `service_tier ${JSON.stringify(value)} changes the price per token; send "auto" or "default", or leave it out`;
  }
  if (field === 'modalities' && value !== undefined && value !== null && !(Array.isArray(value) && value.every((m) => m === 'text'))) {
    return 'modalities may only be ["text"]: audio output is billed at audio prices this gateway does not charge';
  }
  // Price-neutral, but it keeps the conversation on the operator's provider account for 30 days,
  // where no wallet can see or delete it: a retention choice the operator has not made.
  if (field === 'store' && value !== undefined && value !== null && value !== false) {
    return "store: true would keep this conversation on the operator's provider account; leave it out or send false";
  }
  return null;
}

/** Whether the config may list `name` in `extraFields`: only names the gateway does not already decide on. */
export function extraFieldProblem(name: string): string | null {
  if (STANDARD_FIELDS.has(name)) return `${name} is a standard field; it is already forwarded`;
  if (Object.hasOwn(PRICED_FIELDS, name)) return `${name} ${PRICED_FIELDS[name]}; the gateway cannot price it, so it cannot be forwarded`;
  return null;
}

/**
 * Throws a 400 for the first refused field: priced fields by their reason, unknown ones the way
 * OpenAI words it. `extraFields` are the provider's extensions the operator chose to forward.
 */
export function checkForwardedFields(body: Record<string, unknown>, extraFields: ReadonlySet<string>): void {
  const unknown: string[] = [];
  for (const [field, value] of Object.entries(body)) {
    // hasOwn, not `in`: a field named "toString" or "constructor" is an unknown field, not a prototype member.
    if (Object.hasOwn(PRICED_FIELDS, field)) throw badRequest(`${field} is refused: it ${PRICED_FIELDS[field]}; remove it from the request`, { param: field });
    const refused = refusedValue(field, value);
    if (refused) throw badRequest(refused, { param: field });
    if (!STANDARD_FIELDS.has(field) && !extraFields.has(field)) unknown.push(field);
  }
  if (unknown.length) {
    const names = unknown.slice(0, 10).map((f) => f.slice(0, 100));
    throw badRequest(
      `Unrecognized request argument supplied: ${names.join(', ')}; this gateway forwards the chat-completions fields listed in docs/api.md#forwarded-fields and the extensions its operator configured for this provider`,
      { param: names[0] },
    );
  }
}
