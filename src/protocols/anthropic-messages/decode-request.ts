import { badRequest } from '../../refusal.ts';
import { checkFieldValues, checkMessagesRequest, refusePricedFields } from './request-checks.ts';
import { fieldPolicy } from './field-policy.ts';

type Json = Record<string, any>;

/** What the translation reads of the model the request resolved to (absent: a unit test's plain model). */
export interface TranslationTarget {
  /** `thinking` or `effort`: the model reasons and takes that field; `none`: thinking is dropped. */
  readonly reasoningFamily: string;
  /** max_tokens above it is lowered to it: clients choose max_tokens for Claude's window. */
  readonly maxOutputTokens: number;
}

/** OpenAI's `user` is at most 64 characters; a longer Anthropic user_id is dropped. */
const MAX_USER_LENGTH = 64;

/** Anthropic's effort levels as OpenAI's reasoning_effort. */
const EFFORT_AS_REASONING: Readonly<Record<string, string>> = { low: 'low', medium: 'medium', high: 'high', xhigh: 'high', max: 'high' };

/**
 * An Anthropic Messages request as the internal form (OpenAI chat completions), for a provider that
 * speaks OpenAI's protocol. Each field is handled as its entry in field-policy.ts says: translated,
 * dropped (its meaning there), refused, or, for fields of neither protocol and Anthropic's `top_k`,
 * passed only when the operator listed them in the provider's `extraFields`. `cache_control`
 * markers and signed thinking blocks are Anthropic's own and are left out; a mid-conversation
 * system message stays a system message where it stood.
 */
export function decodeMessagesRequest(body: unknown, extraFields: ReadonlySet<string> = new Set(), target?: TranslationTarget): Json {
  const b = checkMessagesRequest(body);
  refusePricedFields(b);
  checkFieldValues(b);
  const maxTokens = target ? Math.min(b.max_tokens, target.maxOutputTokens) : b.max_tokens;
  const out: Json = { model: b.model, max_tokens: maxTokens };
  const messages: Json[] = [];
  if (b.system !== undefined && b.system !== null) messages.push({ role: 'system', content: systemText(b.system) });
  b.messages.forEach((m: Json, i: number) => messages.push(...turn(m, `messages[${i}]`)));
  out.messages = messages;

  for (const [field, value] of Object.entries(b)) {
    switch (field) {
      case 'model':
      case 'max_tokens':
      case 'messages':
      case 'system':
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
        if (typeof user === 'string' && user && user.length <= MAX_USER_LENGTH) out.user = user;
        break;
      }
      case 'temperature':
      case 'top_p':
      case 'stream':
        out[field] = value;
        break;
      case 'thinking':
      case 'output_config':
        break;
      default: {
        // An operator's extension wins; then the field's policy: dropped fields are left out, and
        // anything else (top_k, an OpenAI-only field such as n, a field Anthropic does not have) is refused.
        if (extraFields.has(field)) out[field] = value;
        else if (fieldPolicy(field)?.translated !== 'drop') {
          throw badRequest(
            `Unrecognized request argument supplied: ${field.slice(0, 100)}; this gateway forwards the Messages API fields listed in docs/api.md#forwarded-fields and the extensions its operator configured for this model's provider`,
            { param: field },
          );
        }
      }
    }
  }
  Object.assign(out, reasoning(b, maxTokens, target));
  return out;
}

/**
 * `thinking` and `output_config.effort` for the translated model. Without a target (a plain
 * decode) `thinking` goes on as sent, as before. A model with no reasoning family does not think:
 * both are dropped. A reasoning model gets `thinking` with a budget (kept below max_tokens) or, for
 * adaptive thinking, `reasoning_effort` from the effort (medium when none is given); the chat plan
 * then gives each family the field it takes.
 */
function reasoning(b: Json, maxTokens: number, target: TranslationTarget | undefined): Json {
  const thinking = b.thinking as Json | null | undefined;
  const effort = (b.output_config as Json | null | undefined)?.effort;
  if (!target) return thinking !== undefined ? { thinking } : {};
  if (target.reasoningFamily === 'none' || !thinking || thinking.type === 'disabled') return {};
  if (thinking.type === 'enabled' && typeof thinking.budget_tokens === 'number') {
    return { thinking: { type: 'enabled', budget_tokens: Math.max(1, Math.min(thinking.budget_tokens, maxTokens - 1)) } };
  }
  const level = typeof effort === 'string' && Object.hasOwn(EFFORT_AS_REASONING, effort) ? EFFORT_AS_REASONING[effort]! : 'medium';
  if (target.reasoningFamily === 'thinking')
    return { thinking: { type: 'enabled', budget_tokens: Math.max(1, Math.min(ADAPTIVE_BUDGETS[level]!, maxTokens - 1)) } };
  return { reasoning_effort: level };
}

/** A thinking budget for adaptive thinking at each effort, on a model that takes budgets (the chat plan's steps). */
const ADAPTIVE_BUDGETS: Readonly<Record<string, number>> = { low: 1024, medium: 4096, high: 16384 };

/** Anthropic's `system` (a string or text blocks) as one system message's text. */
function systemText(system: unknown): string {
  if (typeof system === 'string') return system;
  if (!Array.isArray(system) || !system.every((s) => s?.type === 'text' && typeof s.text === 'string')) {
    throw badRequest('system must be a string or an array of {"type": "text", "text": "…"} blocks', { param: 'system' });
  }
  return system.map((s) => s.text).join('\n\n');
}

/**
 * One Anthropic turn as OpenAI messages: a user turn's tool results become `tool` messages ahead of
 * its text, and the images and documents a tool result holds (Claude Code's Read of an image, an MCP
 * tool's screenshot) join the user message after them, ahead of the turn's own parts: OpenAI's tool
 * messages carry text only, and a user message between tool messages would break the tool turn.
 */
function turn(m: Json, field: string): Json[] {
  const blocks: Json[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
  // A mid-conversation system message (text only, checked by checkMessagesRequest) stays in place.
  if (m.role === 'system') return [{ role: 'system', content: blocks.map((block) => block.text).join('\n\n') }];
  if (m.role === 'assistant') return [assistant(blocks, field)];
  const results: Json[] = [];
  const resultParts: Json[] = [];
  const parts: Json[] = [];
  blocks.forEach((block, j) => {
    const where = `${field}.content[${j}]`;
    if (block.type === 'tool_result') results.push(toolMessage(block, where, resultParts));
    else parts.push(userPart(block, where));
  });
  const userParts = [...resultParts, ...parts];
  return userParts.length ? [...results, { role: 'user', content: userParts }] : results;
}

function assistant(blocks: Json[], field: string): Json {
  let text = '';
  const calls: Json[] = [];
  blocks.forEach((block, j) => {
    if (block.type === 'text') text += block.text;
    else if (block.type === 'tool_use')
      calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
    // Signed thinking is Anthropic's to check; another provider cannot take it back.
    else if (block.type !== 'thinking' && block.type !== 'redacted_thinking') {
      throw badRequest(`${field}.content[${j}] is a ${JSON.stringify(block.type)} block; assistant turns may hold text, tool_use and thinking blocks`, {
        param: `${field}.content[${j}]`,
      });
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
        return {
          type: 'file',
          file: { file_data: `data:application/pdf;base64,${s.data}`, ...(typeof block.title === 'string' ? { filename: block.title } : {}) },
        };
      }
      if (s.type === 'text' && typeof s.data === 'string') return { type: 'text', text: s.data };
      throw badRequest(`${where} must be a base64 PDF or a text document for this model`, { param: `${where}.source` });
    }
    default:
      throw badRequest(
        `${where} is a ${JSON.stringify(String(block.type).slice(0, 50))} block; user turns may hold text, image, document and tool_result blocks`,
        { param: where },
      );
  }
}

/**
 * A tool_result as OpenAI's tool message, whose content is text only: its text blocks joined; its
 * image and document blocks go to `userParts` as user content parts (userPart refuses any other
 * block), where the plan measures and bounds them like any image the client sends.
 */
function toolMessage(block: Json, where: string, userParts: Json[]): Json {
  const content = block.content;
  let text = '';
  if (typeof content === 'string') text = content;
  else if (Array.isArray(content)) {
    content.forEach((c, k) => {
      if (c?.type === 'text' && typeof c.text === 'string') text += c.text;
      else userParts.push(userPart(c ?? {}, `${where}.content[${k}]`));
    });
  } else if (content !== undefined && content !== null)
    throw badRequest(`${where}.content must be a string or an array of content blocks`, { param: `${where}.content` });
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
    case 'auto':
      return { tool_choice: 'auto', ...serial };
    case 'any':
      return { tool_choice: 'required', ...serial };
    case 'none':
      return { tool_choice: 'none' };
    case 'tool':
      if (typeof c.name === 'string') return { tool_choice: { type: 'function', function: { name: c.name } }, ...serial };
  }
  throw badRequest('tool_choice must be {type: "auto"}, {type: "any"}, {type: "none"} or {type: "tool", name}', { param: 'tool_choice' });
}
