import type { AnthropicTool, AnthropicToolChoice } from './types.ts';
import { refuse, type Translated } from '../translated.ts';

/**
 * Anthropic adds a system prompt of its own whenever tools are present (346 tokens on current
 * models, up to 530 on older ones), which the request's bytes do not show: reserved on top.
 */
export const TOOL_SYSTEM_PROMPT_TOKENS = 600;

/** The hidden prompt tokens Anthropic bills for an encoded Messages body (its tools' system prompt). */
export function hiddenToolPromptTokens(encoded: Record<string, unknown>): number {
  return Array.isArray(encoded.tools) && encoded.tools.length > 0 ? TOOL_SYSTEM_PROMPT_TOKENS : 0;
}

/** OpenAI function tools as Anthropic tools: the JSON schema of `parameters` is Anthropic's `input_schema`. */
export function tools(value: unknown): Translated<AnthropicTool[] | undefined> {
  if (value === undefined || value === null) return { ok: true, value: undefined };
  if (!Array.isArray(value)) return refuse('tools', 'tools must be an array of {type: "function", function: {...}}');
  const out: AnthropicTool[] = [];
  for (const [i, tool] of value.entries()) {
    const fn = tool?.function;
    if (tool?.type !== 'function' || typeof fn?.name !== 'string') {
      return refuse(
        `tools[${i}]`,
        `tools[${i}] must be {type: "function", function: {name, description, parameters}}; Anthropic models take function tools only`,
      );
    }
    const t: AnthropicTool = { name: fn.name, input_schema: fn.parameters ?? { type: 'object', properties: {} } };
    if (typeof fn.description === 'string') t.description = fn.description;
    out.push(t);
  }
  return { ok: true, value: out };
}

/**
 * `tool_choice` in Anthropic's words (required is "any", a named function is "tool"), and
 * `parallel_tool_calls: false` as Anthropic's `disable_parallel_tool_use`, which lives on the choice.
 */
export function toolChoice(choice: unknown, parallelToolCalls: unknown): Translated<AnthropicToolChoice | undefined> {
  const serial = parallelToolCalls === false ? { disable_parallel_tool_use: true } : {};
  if (choice === undefined || choice === null) {
    return { ok: true, value: parallelToolCalls === false ? { type: 'auto', ...serial } : undefined };
  }
  if (choice === 'none') return { ok: true, value: { type: 'none' } };
  if (choice === 'auto') return { ok: true, value: { type: 'auto', ...serial } };
  if (choice === 'required') return { ok: true, value: { type: 'any', ...serial } };
  const name = (choice as { type?: unknown; function?: { name?: unknown } }).function?.name;
  if ((choice as { type?: unknown }).type === 'function' && typeof name === 'string') return { ok: true, value: { type: 'tool', name, ...serial } };
  return refuse('tool_choice', 'tool_choice must be "none", "auto", "required" or {type: "function", function: {name}}');
}
