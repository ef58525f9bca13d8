import type { AnthropicMessage, ContentBlock, TextBlock } from './types.ts';
import { contentBlocks } from './content-parts.ts';
import { refuse, type Translated } from '../translated.ts';

/** The conversation in Anthropic's shape: system text apart, then strictly alternating turns. */
export interface Conversation {
  system: TextBlock[];
  messages: AnthropicMessage[];
}

/**
 * OpenAI's message list as Anthropic's. System and developer messages become the top-level
 * `system` wherever they stood (Anthropic has no system turn); tool results become user turns;
 * consecutive turns of one role are merged, because Anthropic requires alternation; a message
 * with no content left (an assistant's empty string) is dropped, as Anthropic refuses empty turns.
 */
export function conversation(messages: unknown[]): Translated<Conversation> {
  const system: TextBlock[] = [];
  const turns: AnthropicMessage[] = [];
  for (const [i, raw] of messages.entries()) {
    const m = (raw ?? {}) as Record<string, any>;
    const field = `messages[${i}]`;
    let role: 'user' | 'assistant';
    let blocks: Translated<ContentBlock[]>;
    switch (m.role) {
      case 'system':
      case 'developer': {
        const text = textOnly(m.content, `${field}.content`, "Anthropic's system prompt");
        if (!text.ok) return text;
        system.push(...text.value);
        continue;
      }
      case 'user':
        role = 'user';
        blocks = contentBlocks(m.content, `${field}.content`);
        break;
      case 'assistant':
        role = 'assistant';
        blocks = assistantBlocks(m, field);
        break;
      case 'tool':
        role = 'user';
        blocks = toolResult(m, field);
        break;
      case 'function':
        return refuse(`${field}.role`, `${field} uses the deprecated "function" role; send tool results as role "tool" with a tool_call_id`);
      default:
        return refuse(`${field}.role`, `${field}.role ${JSON.stringify(m.role)} must be system, developer, user, assistant or tool`);
    }
    if (!blocks.ok) return blocks;
    if (blocks.value.length === 0) continue;
    const last = turns.at(-1);
    if (last?.role === role) last.content.push(...blocks.value);
    else turns.push({ role, content: blocks.value });
  }
  if (turns.length === 0)
    return refuse(
      'messages',
      'messages needs at least one user or assistant message with content; Anthropic models answer a conversation, not a system prompt alone',
    );
  // Anthropic wants a user turn's tool results before its text ("tool, user" merged into one turn).
  for (const turn of turns) if (turn.role === 'user') turn.content = toolResultsFirst(turn.content);
  return { ok: true, value: { system, messages: turns } };
}

function textOnly(content: unknown, field: string, what: string): Translated<TextBlock[]> {
  const blocks = contentBlocks(content, field);
  if (!blocks.ok) return blocks;
  if (blocks.value.some((b) => b.type !== 'text')) return refuse(field, `${field} may hold only text; ${what} cannot carry images or files`);
  return { ok: true, value: blocks.value as TextBlock[] };
}

/**
 * An assistant turn: its thinking blocks first (Anthropic requires the signed thinking of a turn
 * that called tools to come back with it; clients carry them as `thinking_blocks`, LiteLLM's
 * name), then its text, then one tool_use per tool call. `reasoning_content` alone cannot be sent
 * back: Anthropic accepts thinking only with the signature it issued.
 */
function assistantBlocks(m: Record<string, any>, field: string): Translated<ContentBlock[]> {
  const thinking = thinkingBlocks(m.thinking_blocks, `${field}.thinking_blocks`);
  if (!thinking.ok) return thinking;
  const text = contentBlocks(m.content, `${field}.content`);
  if (!text.ok) return text;
  const blocks: ContentBlock[] = [...thinking.value, ...text.value];
  if (m.tool_calls === undefined || m.tool_calls === null) return { ok: true, value: blocks };
  if (!Array.isArray(m.tool_calls)) return refuse(`${field}.tool_calls`, `${field}.tool_calls must be an array`);
  for (const [j, call] of m.tool_calls.entries()) {
    const where = `${field}.tool_calls[${j}]`;
    const fn = call?.function;
    if (typeof call?.id !== 'string' || typeof fn?.name !== 'string') return refuse(where, `${where} needs a string id and function.name`);
    const input = toolInput(fn.arguments);
    if (input === undefined)
      return refuse(`${where}.function.arguments`, `${where}.function.arguments must be a JSON object in a string; Anthropic takes tool inputs as objects`);
    blocks.push({ type: 'tool_use', id: call.id, name: fn.name, input });
  }
  return { ok: true, value: blocks };
}

function toolInput(args: unknown): Record<string, unknown> | undefined {
  if (args === undefined || args === null || args === '') return {};
  if (typeof args !== 'string') return undefined;
  try {
    const parsed = JSON.parse(args);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

function thinkingBlocks(value: unknown, field: string): Translated<ContentBlock[]> {
  if (value === undefined || value === null) return { ok: true, value: [] };
  const valid =
    Array.isArray(value) &&
    value.every(
      (b) =>
        (b?.type === 'thinking' && typeof b.thinking === 'string' && typeof b.signature === 'string') ||
        (b?.type === 'redacted_thinking' && typeof b.data === 'string'),
    );
  if (!valid)
    return refuse(
      field,
      `${field} must be the thinking blocks an earlier answer returned ({type: "thinking", thinking, signature} or {type: "redacted_thinking", data})`,
    );
  return { ok: true, value: (value as ContentBlock[]).map((b) => ({ ...b })) };
}

function toolResult(m: Record<string, any>, field: string): Translated<ContentBlock[]> {
  if (typeof m.tool_call_id !== 'string' || !m.tool_call_id)
    return refuse(`${field}.tool_call_id`, `${field} is a tool result and needs the tool_call_id it answers`);
  if (typeof m.content === 'string') return { ok: true, value: [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: m.content }] };
  const blocks = textOnly(m.content, `${field}.content`, 'a tool result sent to Anthropic');
  if (!blocks.ok) return blocks;
  return { ok: true, value: [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: blocks.value }] };
}

function toolResultsFirst(blocks: ContentBlock[]): ContentBlock[] {
  return [...blocks.filter((b) => b.type === 'tool_result'), ...blocks.filter((b) => b.type !== 'tool_result')];
}
