import { badRequest } from '../../refusal.ts';
import { checkMessagesRequest, checkServiceTier, refusePricedExtras } from './request-checks.ts';

type Json = Record<string, any>;

/** Messages fields whose name and meaning are OpenAI's too, copied as they are. */
const SAME_IN_BOTH: ReadonlySet<string> = new Set(['temperature', 'top_p', 'stream', 'thinking']);

/**
 * An Anthropic Messages request as the internal form (OpenAI chat completions), for a provider that
 * speaks OpenAI's protocol. `cache_control` markers and signed thinking blocks are Anthropic's own
 * and mean nothing to such a provider, so they are left out. Fields of neither protocol, and
 * Anthropic's `top_k`, go through only when the operator listed them in the provider's
 * `extraFields`; OpenAI-only fields (n, response_format, …) are not Messages fields and are
 * refused like any unknown one.
 */
export function decodeMessagesRequest(body: unknown, extraFields: ReadonlySet<string> = new Set()): Json {
  const b = checkMessagesRequest(body);
  refusePricedExtras(b);
  const out: Json = { model: b.model, max_tokens: b.max_tokens };
  const messages: Json[] = [];
  if (b.system !== undefined && b.system !== null) messages.push({ role: 'system', content: systemText(b.system) });
  b.messages.forEach((m: Json, i: number) => messages.push(...turn(m, `messages[${i}]`)));
  out.messages = messages;

  for (const [field, value] of Object.entries(b)) {
    switch (field) {
      case 'model': case 'max_tokens': case 'messages': case 'system':
        break;
      case 'stop_sequences':
        if (value !== undefined && value !== null) out.stop = value;
        break;
      case 'tools':
        if (value !== undefined && value !== null) out.tools = tools(value);
        break;
      case 'tool_choice':
        Object.assign(out, toolChoice(value));
        break;
      case 'metadata': {
        const user = (value as Json | null)?.user_id;
        if (typeof user === 'string' && user) out.user = user;
        break;
      }
      case 'service_tier':
        checkServiceTier(value);
        break;
      default:
        // temperature, top_p, stream and thinking have the same name and meaning in both protocols;
        // anything else (top_k, or an OpenAI-only field such as n) only as a configured extension.
        if (!SAME_IN_BOTH.has(field) && !extraFields.has(field)) {
          throw badRequest(`Unrecognized request argument supplied: ${field.slice(0, 100)}; this gateway forwards the Messages API fields listed in docs/api.md#forwarded-fields and the extensions its operator configured for this model's provider`, { param: field });
        }
        out[field] = value;
    }
  }
  return out;
}

/** Anthropic's `system` (a string or text blocks) as one system message's text. */
function systemText(system: unknown): string {
  if (typeof system === 'string') return system;
  if (!Array.isArray(system) || !system.every((s) => s?.type === 'text' && typeof s.text === 'string')) {
    throw badRequest('system must be a string or an array of {"type": "text", "text": "…"} blocks', { param: 'system' });
  }
  return system.map((s) => s.text).join('\n\n');
}

/** One Anthropic turn as OpenAI messages: a user turn's tool results become `tool` messages ahead of its text. */
function turn(m: Json, field: string): Json[] {
  const blocks: Json[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
  if (m.role === 'assistant') return [assistant(blocks, field)];
  const results: Json[] = [];
  const parts: Json[] = [];
  blocks.forEach((block, j) => {
    const where = `${field}.content[${j}]`;
    if (block.type === 'tool_result') results.push(toolMessage(block, where));
    else parts.push(userPart(block, where));
  });
  return parts.length ? [...results, { role: 'user', content: parts }] : results;
}

function assistant(blocks: Json[], field: string): Json {
  let text = '';
  const calls: Json[] = [];
  blocks.forEach((block, j) => {
    if (block.type === 'text') text += block.text;
    else if (block.type === 'tool_use') calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
    // Signed thinking is Anthropic's to check; another provider cannot take it back.
    else if (block.type !== 'thinking' && block.type !== 'redacted_thinking') {
      throw badRequest(`${field}.content[${j}] is a ${JSON.stringify(block.type)} block; assistant turns may hold text, tool_use and thinking blocks`, { param: `${field}.content[${j}]` });
    }
  });
  const message: Json = { role: 'assistant', content: text || null };
  if (calls.length) message.tool_calls = calls;
  return message;
}

function userPart(block: Json, where: string): Json {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text };
    case 'image': {
      const s = block.source ?? {};
      if (s.type === 'base64') return { type: 'image_url', image_url: { url: `data:${s.media_type};base64,${s.data}` } };
      if (s.type === 'url') return { type: 'image_url', image_url: { url: s.url } };
      throw badRequest(`${where}.source must be {type: "base64", media_type, data} or {type: "url", url}`, { param: `${where}.source` });
    }
    case 'document': {
      const s = block.source ?? {};
      if (s.type === 'base64' && s.media_type === 'application/pdf') {
        return { type: 'file', file: { file_data: `data:application/pdf;base64,${s.data}`, ...(typeof block.title === 'string' ? { filename: block.title } : {}) } };
      }
      if (s.type === 'text' && typeof s.data === 'string') return { type: 'text', text: s.data };
      throw badRequest(`${where} must be a base64 PDF or a text document for this model`, { param: `${where}.source` });
    }
    default:
      throw badRequest(`${where} is a ${JSON.stringify(String(block.type).slice(0, 50))} block; user turns may hold text, image, document and tool_result blocks`, { param: where });
  }
}

/** A tool_result as OpenAI's tool message, whose content is text only. */
function toolMessage(block: Json, where: string): Json {
  const content = block.content;
  let text: string;
  if (content === undefined || content === null) text = '';
  else if (typeof content === 'string') text = content;
  else if (Array.isArray(content) && content.every((c) => c?.type === 'text' && typeof c.text === 'string')) text = content.map((c) => c.text).join('');
  else throw badRequest(`${where}.content may hold only text for this model (its provider takes tool results as text)`, { param: `${where}.content` });
  return { role: 'tool', tool_call_id: block.tool_use_id, content: block.is_error === true ? `Error: ${text}` : text };
}

function tools(value: unknown): Json[] {
  if (!Array.isArray(value)) throw badRequest('tools must be an array of {name, description, input_schema}', { param: 'tools' });
  return value.map((t, i) => {
    if (typeof t?.name !== 'string' || (t.type !== undefined && t.type !== 'custom')) {
      throw badRequest(`tools[${i}] must be {name, description, input_schema}; this model takes custom tools only`, { param: `tools[${i}]` });
    }
    const fn: Json = { name: t.name, parameters: t.input_schema ?? { type: 'object', properties: {} } };
    if (typeof t.description === 'string') fn.description = t.description;
    return { type: 'function', function: fn };
  });
}

function toolChoice(value: unknown): Json {
  if (value === undefined || value === null) return {};
  const c = value as Json;
  const serial = c.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  switch (c.type) {
    case 'auto': return { tool_choice: 'auto', ...serial };
    case 'any': return { tool_choice: 'required', ...serial };
    case 'none': return { tool_choice: 'none' };
    case 'tool':
      if (typeof c.name === 'string') return { tool_choice: { type: 'function', function: { name: c.name } }, ...serial };
  }
  throw badRequest('tool_choice must be {type: "auto"}, {type: "any"}, {type: "none"} or {type: "tool", name}', { param: 'tool_choice' });
}
