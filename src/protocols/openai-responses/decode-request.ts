import { badRequest } from '../../refusal.ts';
import { isStandardChatField } from '../openai-chat/request-fields.ts';
import { inputMessages, NO_STORE } from './decode-input.ts';
import { ACCEPTED_INCLUDES, DROPPED_FIELDS, isDroppedToolType } from './dropped.ts';

/**
 * An OpenAI Responses request (POST /v1/responses) as the internal chat-completions body. The plan
 * then treats it exactly as a chat request: the model's limits, the allowlist, the reservation on
 * the encoded upstream body. References to stored responses arrive already resolved (see STATEFUL);
 * fields that need state OpenAI keeps and Tollgate does not (conversations, prompt templates) or
 * priced built-in tools are refused here, by their Responses name. What is accepted and not passed
 * on (Codex's include, client_metadata, web_search and namespace tools) is listed in dropped.ts.
 */

/**
 * Fields that refer to state this request cannot reach, so the text is never seen or bounded. A
 * keyed request's previous_response_id is resolved against the key's stored responses before
 * decoding (src/stored-responses/resolve.ts) and never gets here; one that does was sent without an
 * API key (pay-per-request) or to a gateway with responses.store off.
 */
const STATEFUL: Record<string, string> = {
  previous_response_id: `${NO_STORE}, so there is no earlier response to continue; send the whole conversation in input`,
  conversation: 'Tollgate keeps no conversations; send the whole conversation in input',
  prompt: 'refers to a prompt template stored on an OpenAI account; send the instructions and input themselves',
  background: 'asks for a response that is kept and polled later; Tollgate answers within the request (use stream: true for long answers)',
};

/**
 * OpenAI's built-in tools: each is billed per call (or per session) on top of tokens, which the
 * reservation cannot bound. Refused rather than dropped: a client that offers them means the model
 * to act with them. (web_search is dropped instead: Codex offers it on every turn, dropped.ts.)
 */
const BUILT_IN_TOOLS = new Set([
  'file_search',
  'computer_use_preview',
  'computer_use',
  'code_interpreter',
  'image_generation',
  'mcp',
  'local_shell',
  'shell',
  'apply_patch',
  'custom',
]);

/** Responses fields translated below; anything else goes on to the chat allowlist (extensions an operator forwards). */
const TRANSLATED = new Set([
  'model',
  'input',
  'instructions',
  'tools',
  'tool_choice',
  'max_output_tokens',
  'temperature',
  'top_p',
  'parallel_tool_calls',
  'text',
  'reasoning',
  'metadata',
  'user',
  'safety_identifier',
  'prompt_cache_key',
  'service_tier',
  'stream',
  'stream_options',
  'store',
  'include',
  'truncation',
  'max_tool_calls',
  ...DROPPED_FIELDS,
  ...Object.keys(STATEFUL),
]);

/** Passed on under the same name when present. */
const SAME_NAME = ['model', 'temperature', 'top_p', 'parallel_tool_calls', 'user', 'safety_identifier', 'prompt_cache_key', 'service_tier', 'stream'];

const present = (v: unknown) => v !== undefined && v !== null;

export function decodeResponsesRequest(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('request body must be a JSON object');
  const b = body as Record<string, unknown>;
  refuseStateful(b);
  if (!present(b.input)) throw badRequest('input is required: a string, or an array of messages and function call items', { param: 'input' });

  const out: Record<string, unknown> = { messages: inputMessages(b.input, b.instructions) };
  for (const field of SAME_NAME) if (present(b[field])) out[field] = b[field];
  for (const [field, value] of Object.entries(b)) {
    if (TRANSLATED.has(field)) continue;
    // A chat-completions field is not a Responses one (OpenAI answers the same): `messages` or
    // `max_tokens` beside `input` would bypass the translation.
    if (isStandardChatField(field))
      throw badRequest(
        `Unrecognized request argument supplied: ${field}; this is a chat-completions field, see the Responses API reference for its equivalent`,
        { param: field },
      );
    out[field] = value;
  }

  if (present(b.max_output_tokens)) {
    const m = b.max_output_tokens;
    if (typeof m !== 'number' || !Number.isInteger(m) || m < 1)
      throw badRequest('max_output_tokens must be a positive whole number', { param: 'max_output_tokens' });
    out.max_tokens = m;
  }
  if (present(b.tools)) {
    const tools = functionTools(b.tools);
    // Only dropped tools (dropped.ts): the request goes on as one without tools.
    if (tools.length > 0 || (Array.isArray(b.tools) && b.tools.length === 0)) out.tools = tools;
  }
  if (present(b.tool_choice)) out.tool_choice = toolChoice(b.tool_choice);
  Object.assign(out, textOptions(b.text), reasoningOptions(b.reasoning));
  checkIgnorable(b);
  return out;
}

function refuseStateful(b: Record<string, unknown>): void {
  for (const [field, why] of Object.entries(STATEFUL)) {
    if (present(b[field]) && b[field] !== false) throw badRequest(`${field} is not supported: ${why}`, { param: field });
  }
  if (!present(b.include)) return;
  if (!Array.isArray(b.include)) throw badRequest('include must be an array of strings', { param: 'include' });
  const refused = b.include.filter((x) => typeof x !== 'string' || !ACCEPTED_INCLUDES.has(x));
  if (refused.length > 0) {
    // JSON.stringify, not String(): String() of a client's {"toString": 1} throws.
    const named = (x: unknown) => (typeof x === 'string' ? x : JSON.stringify(x)).slice(0, 60);
    const names = refused.map(named).join(', ');
    const accepted = [...ACCEPTED_INCLUDES].join(', ');
    throw badRequest(
      `include (${names}) asks for data this gateway does not return; leave include out (only ${accepted} is accepted, answered with no reasoning items)`,
      {
        param: 'include',
      },
    );
  }
}

/** Fields accepted and not forwarded: they change nothing a tokens-only answer carries (`store` is the route's). */
function checkIgnorable(b: Record<string, unknown>): void {
  // store: read by the route, which keeps a keyed request's response unless it is false.
  if (present(b.store) && typeof b.store !== 'boolean') throw badRequest('store must be true or false', { param: 'store' });
  if (present(b.metadata) && (typeof b.metadata !== 'object' || Array.isArray(b.metadata)))
    throw badRequest('metadata must be an object of string values', { param: 'metadata' });
  if (present(b.client_metadata) && (typeof b.client_metadata !== 'object' || Array.isArray(b.client_metadata))) {
    throw badRequest('client_metadata must be an object of string values', { param: 'client_metadata' });
  }
  if (present(b.truncation) && b.truncation !== 'disabled') {
    throw badRequest('truncation "auto" would drop input to fit the context window; this gateway sends the input as given: send "disabled" or leave it out', {
      param: 'truncation',
    });
  }
  if (present(b.max_tool_calls) && (typeof b.max_tool_calls !== 'number' || !Number.isInteger(b.max_tool_calls) || b.max_tool_calls < 1)) {
    throw badRequest('max_tool_calls must be a positive whole number', { param: 'max_tool_calls' });
  }
}

/** Responses' flat function tools as chat tools; web_search and namespace tools are dropped (dropped.ts), another built-in tool is refused by name. */
function functionTools(tools: unknown): unknown[] {
  if (!Array.isArray(tools)) throw badRequest('tools must be an array of function tools', { param: 'tools' });
  return tools.flatMap((t, i) => {
    const tool = (typeof t === 'object' && t !== null ? t : {}) as Record<string, unknown>;
    const where = `tools[${i}]`;
    if (isDroppedToolType(tool.type)) return [];
    if (tool.type !== 'function') {
      const type = typeof tool.type === 'string' ? tool.type.slice(0, 50) : '';
      if (BUILT_IN_TOOLS.has(type) || type.startsWith('computer_use')) {
        throw badRequest(
          `${where} is OpenAI's built-in ${type} tool, a feature billed per use beyond tokens that this gateway does not offer; send function tools`,
          { param: where },
        );
      }
      throw badRequest(`${where} must be a function tool: {"type": "function", "name": "…", "parameters": {…}}`, { param: where });
    }
    if (typeof tool.name !== 'string' || !tool.name) throw badRequest(`${where}.name must be a non-empty string`, { param: `${where}.name` });
    const fn: Record<string, unknown> = { name: tool.name };
    for (const k of ['description', 'parameters', 'strict']) if (present(tool[k])) fn[k] = tool[k];
    return [{ type: 'function', function: fn }];
  });
}

function toolChoice(choice: unknown): unknown {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  const c = (typeof choice === 'object' && choice !== null ? choice : {}) as Record<string, unknown>;
  if (c.type === 'function' && typeof c.name === 'string') return { type: 'function', function: { name: c.name } };
  throw badRequest('tool_choice must be "auto", "none", "required" or {"type": "function", "name": "…"}; built-in tools are not offered', {
    param: 'tool_choice',
  });
}

/** `text.format` as response_format, `text.verbosity` as verbosity. */
function textOptions(text: unknown): Record<string, unknown> {
  if (!present(text)) return {};
  if (typeof text !== 'object' || Array.isArray(text))
    throw badRequest('text must be an object such as {"format": {"type": "json_object"}}', { param: 'text' });
  const t = text as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  if (present(t.verbosity)) out.verbosity = t.verbosity;
  const f = (t.format ?? { type: 'text' }) as Record<string, unknown>;
  if (f.type === 'json_object') out.response_format = { type: 'json_object' };
  else if (f.type === 'json_schema') {
    if (typeof f.name !== 'string' || typeof f.schema !== 'object' || f.schema === null)
      throw badRequest('text.format of type json_schema needs a name and a schema', { param: 'text.format' });
    const schema: Record<string, unknown> = { name: f.name, schema: f.schema };
    for (const k of ['description', 'strict']) if (present(f[k])) schema[k] = f[k];
    out.response_format = { type: 'json_schema', json_schema: schema };
  } else if (f.type !== 'text') throw badRequest('text.format.type must be text, json_object or json_schema', { param: 'text.format' });
  return out;
}

/** `reasoning.effort` as reasoning_effort (the plan checks it against the model and the config). */
function reasoningOptions(reasoning: unknown): Record<string, unknown> {
  if (!present(reasoning)) return {};
  if (typeof reasoning !== 'object' || Array.isArray(reasoning))
    throw badRequest('reasoning must be an object such as {"effort": "low"}', { param: 'reasoning' });
  const effort = (reasoning as Record<string, unknown>).effort;
  // `summary` is accepted and has no effect: reasoning is billed as output but not returned as items.
  return present(effort) ? { reasoning_effort: effort } : {};
}

/** Internal fields the plan may name in a refusal, by the Responses field they came from. */
const PARAM_NAMES: Record<string, string> = {
  max_tokens: 'max_output_tokens',
  response_format: 'text.format',
  verbosity: 'text.verbosity',
  reasoning_effort: 'reasoning.effort',
};

/**
 * The Responses name of an internal field. Messages map to `input` as a whole: instructions and
 * merged function calls shift the indexes, so an internal index would point at the wrong item.
 */
export function responsesParam(internal: string): string {
  if (internal === 'messages' || internal.startsWith('messages[')) return 'input';
  return PARAM_NAMES[internal] ?? internal;
}
