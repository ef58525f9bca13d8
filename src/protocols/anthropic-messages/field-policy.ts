import { badRequest } from '../../refusal.ts';
import { THINKING_KEYS, THINKING_TYPES } from './thinking.ts';

type Json = Record<string, any>;

/**
 * Every top-level field of a Messages request, as the gateway handles it on purpose (what
 * Claude Code 2.1.332 and the Anthropic SDKs send). `native`: the model's provider is an Anthropic
 * one and gets the request untranslated; `translated`: the request becomes chat completions for an
 * OpenAI-compatible provider.
 *
 * - `forward`: sent as it is (after the value checks in `checkFieldValues`);
 * - `translate`: rewritten into chat completions (src/protocols/anthropic-messages/decode-request.ts);
 * - `drop`: left out, because the translated provider has no such thing and the answer stays what the
 *   client expects (each reason says what leaving it out means);
 * - `refuse`: a 400 naming the field, because it is billed beyond tokens at prices the catalog does
 *   not have, so the reservation would not bound it;
 * - `extension`: only when the operator lists it in the provider's `extraFields`.
 *
 * A field not listed here is refused as unrecognized (unless in `extraFields`): `workspace_id`,
 * `user_profile_id` and `diagnostics` among them, which act on the operator's Anthropic account.
 */
export type FieldAction = 'forward' | 'translate' | 'drop' | 'refuse' | 'extension';

export interface FieldPolicy {
  readonly native: FieldAction;
  readonly translated: FieldAction;
  readonly why: string;
}

export const MESSAGES_FIELDS: Readonly<Record<string, FieldPolicy>> = {
  model: { native: 'forward', translated: 'translate', why: "rewritten to the deployment's upstream name" },
  messages: {
    native: 'forward',
    translated: 'translate',
    why: 'mid-conversation system messages included: native as sent, translated into system messages in place',
  },
  system: { native: 'forward', translated: 'translate', why: 'the system message; cache_control on its blocks is dropped on translation' },
  max_tokens: {
    native: 'forward',
    translated: 'translate',
    why: "clamped to the model's maxOutputTokens (clients choose it for Claude's window); it bounds the reservation",
  },
  stop_sequences: { native: 'forward', translated: 'translate', why: 'becomes stop' },
  stream: { native: 'forward', translated: 'translate', why: 'same meaning' },
  temperature: { native: 'forward', translated: 'translate', why: 'same meaning' },
  top_p: { native: 'forward', translated: 'translate', why: 'same meaning' },
  top_k: {
    native: 'forward',
    translated: 'extension',
    why: 'OpenAI-compatible providers differ on it; forwarded only if the operator lists it in extraFields',
  },
  tools: {
    native: 'forward',
    translated: 'translate',
    why: 'custom tools only (server and built-in tools are billed beyond tokens); defer_loading, cache_control and input_examples are dropped on translation: every tool is sent in full, each byte of it in the reservation',
  },
  tool_choice: { native: 'forward', translated: 'translate', why: 'any becomes required' },
  thinking: {
    native: 'forward',
    translated: 'translate',
    why: 'thinking output is billed as output, inside max_tokens; on translation it goes only to a model with a reasoningFamily (adaptive thinking becomes an effort), and is dropped for others, which do not think',
  },
  metadata: {
    native: 'forward',
    translated: 'translate',
    why: "user_id becomes user when it is at most 64 characters (OpenAI's limit); Claude Code's longer JSON user_id is dropped",
  },
  service_tier: { native: 'forward', translated: 'drop', why: 'only auto and standard_only, which ask for nothing dearer than the standard price' },
  context_management: {
    native: 'forward',
    translated: 'drop',
    why: 'clearing edits (clear_thinking_*, clear_tool_uses_*) only remove input, so the reservation on the request as sent still bounds it; other edits (server-side compaction) run extra model calls and are refused. Translated: the provider has no context editing, so the whole conversation as sent is the prompt (thinking blocks are dropped there anyway)',
  },
  output_config: {
    native: 'forward',
    translated: 'translate',
    why: 'effort only (how much of max_tokens the model spends); translated into reasoning_effort for a model with a reasoningFamily, dropped for others. Other keys (format) are refused by name',
  },
  cache_control: {
    native: 'forward',
    translated: 'drop',
    why: "automatic prompt caching: cache writes are billed at the model's cache-write price (5-minute ttl only); an OpenAI-compatible provider caches by itself",
  },
  speed: { native: 'forward', translated: 'drop', why: 'only "standard"; fast mode is billed at a premium the catalog has no price for' },
  inference_geo: { native: 'forward', translated: 'drop', why: 'only "global"; a pinned inference region is billed at a premium the catalog has no price for' },
  container: { native: 'refuse', translated: 'refuse', why: 'runs a code-execution container, billed by the hour on top of tokens' },
  mcp_servers: { native: 'refuse', translated: 'refuse', why: 'calls remote MCP servers through the provider, whose tool calls are billed on top of tokens' },
};

/** The policy of a field, or undefined for one the Messages API as served here does not know. */
export function fieldPolicy(field: string): FieldPolicy | undefined {
  return Object.hasOwn(MESSAGES_FIELDS, field) ? MESSAGES_FIELDS[field] : undefined;
}

/** Refuses the fields priced beyond tokens, naming the first. */
export function refusePricedFields(b: Json): void {
  for (const field of Object.keys(b)) {
    const policy = fieldPolicy(field);
    if (policy?.native === 'refuse') throw badRequest(`${field} is refused: it ${policy.why}; remove it from the request`, { param: field });
  }
}

/** Context-management edits that only clear content from the prompt. */
const CLEARING_EDIT = /^clear_(thinking|tool_uses)_\d{8}$/;
/** The output_config keys that are price-neutral. */
const OUTPUT_CONFIG_KEYS: ReadonlySet<string> = new Set(['effort']);
const EFFORTS: ReadonlySet<string> = new Set(['low', 'medium', 'high', 'xhigh', 'max']);

/**
 * The value checks of the fields that are forwarded (or dropped) only for some values, the same on
 * both paths: a value that would change the price is refused by name rather than passed on (native)
 * or silently not done (translated).
 */
export function checkFieldValues(b: Json): void {
  const tier = b.service_tier;
  if (tier !== undefined && tier !== null && tier !== 'auto' && tier !== 'standard_only') {
    throw badRequest('service_tier may only be "auto" or "standard_only" here; leave it out', { param: 'service_tier' });
  }
  if (b.speed !== undefined && b.speed !== null && b.speed !== 'standard') {
    throw badRequest(
      `speed ${JSON.stringify(String(b.speed).slice(0, 20))} is refused: fast mode is billed at a premium this gateway has no price for; send "standard" or leave it out`,
      { param: 'speed' },
    );
  }
  if (b.inference_geo !== undefined && b.inference_geo !== null && b.inference_geo !== 'global') {
    throw badRequest(
      'inference_geo is refused: a pinned inference region is billed at a premium this gateway has no price for; send "global" or leave it out',
      { param: 'inference_geo' },
    );
  }
  checkContextManagement(b.context_management);
  checkThinking(b.thinking);
  checkOutputConfig(b.output_config, 'output_config');
  (Array.isArray(b.messages) ? b.messages : []).forEach((m: Json, i: number) => {
    if (m && typeof m === 'object' && m.output_config !== undefined) checkOutputConfig(m.output_config, `messages[${i}].output_config`);
  });
}

/**
 * Thinking types outside THINKING_TYPES (a new mode with its own price or budget rules) are refused by name.
 * `thinking` is forwarded (native) or translated only as {type, budget_tokens, display} with a type
 * the gateway knows; budget_tokens is checked against max_tokens by thinkingFor (thinking.ts).
 */
function checkThinking(value: unknown): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'object' || Array.isArray(value))
    throw badRequest('thinking must be an object such as {"type": "enabled", "budget_tokens": 2048}', { param: 'thinking' });
  for (const key of Object.keys(value)) {
    if (!THINKING_KEYS.has(key))
      throw badRequest(`thinking.${key.slice(0, 100)} is not accepted; thinking takes ${[...THINKING_KEYS].join(', ')}`, {
        param: `thinking.${key.slice(0, 100)}`,
      });
  }
  const type = (value as Json).type;
  if (typeof type !== 'string' || !THINKING_TYPES.has(type)) {
    throw badRequest(`thinking.type ${JSON.stringify(String(type).slice(0, 40))} is refused: send one of ${[...THINKING_TYPES].join(', ')}`, {
      param: 'thinking.type',
    });
  }
}

function checkContextManagement(value: unknown): void {
  if (value === undefined || value === null) return;
  const edits = (value as Json).edits;
  if (typeof value !== 'object' || Array.isArray(value) || (edits !== undefined && !Array.isArray(edits))) {
    throw badRequest('context_management must be {"edits": [...]}', { param: 'context_management' });
  }
  for (const key of Object.keys(value)) {
    if (key !== 'edits')
      throw badRequest(`context_management.${key.slice(0, 50)} is not accepted here; send only edits`, { param: `context_management.${key.slice(0, 50)}` });
  }
  (edits ?? []).forEach((edit: Json, i: number) => {
    const type = edit?.type;
    if (typeof type !== 'string' || !CLEARING_EDIT.test(type)) {
      throw badRequest(
        `context_management.edits[${i}] of type ${JSON.stringify(String(type).slice(0, 50))} is refused: only clearing edits (clear_thinking_*, clear_tool_uses_*) are accepted; server-side compaction runs extra model calls this gateway cannot bound`,
        { param: `context_management.edits[${i}]` },
      );
    }
  });
}

function checkOutputConfig(value: unknown, path: string): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest(`${path} must be an object such as {"effort": "medium"}`, { param: path });
  for (const [key, v] of Object.entries(value)) {
    if (!OUTPUT_CONFIG_KEYS.has(key))
      throw badRequest(`${path}.${key.slice(0, 50)} is not accepted by this gateway; only ${path}.effort is`, { param: `${path}.${key.slice(0, 50)}` });
    if (v !== null && (typeof v !== 'string' || !EFFORTS.has(v)))
      throw badRequest(`${path}.effort must be one of ${[...EFFORTS].join(', ')}`, { param: `${path}.effort` });
  }
}

/**
 * Client `anthropic-beta` values, as the gateway handles them on a native request (a translated one
 * sends no beta anywhere: the fields above decide what happens there).
 * - `forward`: price-neutral, sent to the Anthropic provider merged with the operator's `anthropicBeta`;
 * - `refuse`: changes the price beyond what the catalog prices and the reservation bounds; a 400
 *   naming it (an operator who prices it turns it on for every request with `anthropicBeta`).
 * Any other value is not forwarded (and named in the `x-tollgate-betas-dropped` response header):
 * a beta the gateway has not reviewed may change the price, and without it Anthropic ignores the
 * fields that need it or refuses them, which costs nothing.
 */
export const MESSAGES_BETAS: Readonly<Record<string, { action: 'forward' | 'refuse'; why: string }>> = {
  'claude-code-20250219': { action: 'forward', why: 'identifies Claude Code; no price change' },
  'interleaved-thinking-2025-05-14': { action: 'forward', why: 'thinking between tool calls, billed as output inside max_tokens' },
  'context-management-2025-06-27': { action: 'forward', why: 'context editing; only clearing edits pass the field check' },
  'advanced-tool-use-2025-11-20': {
    action: 'forward',
    why: 'deferred tool loading and tool examples, all inside the request bytes; the server tool-search tool is refused as a server tool',
  },
  'effort-2025-11-24': { action: 'forward', why: 'output_config.effort spends less or more of max_tokens' },
  'per-turn-control-2026-07-01': { action: 'forward', why: 'output_config on a message, checked like the top-level one' },
  'mid-conversation-tool-changes-2026-07-01': { action: 'forward', why: 'tools changing between turns; every tool is in the request bytes' },
  'thinking-token-count-2026-05-13': { action: 'forward', why: 'reports thinking tokens in usage; no price change' },
  'prompt-caching-2024-07-31': { action: 'forward', why: 'cache writes and reads are priced per model' },
  'token-efficient-tools-2025-02-19': { action: 'forward', why: 'fewer output tokens for tool calls' },
  'fine-grained-tool-streaming-2025-05-14': { action: 'forward', why: 'streams tool input sooner; no price change' },
  'output-128k-2025-02-19': { action: 'forward', why: "a larger max_tokens, which the reservation covers (and the model's maxOutputTokens caps)" },
  'context-1m-2025-08-07': {
    action: 'refuse',
    why: "a 1M-token window billed at a higher rate above 200K input tokens, which the catalog's prices and contextLength do not cover",
  },
  'extended-cache-ttl-2025-04-11': { action: 'refuse', why: 'one-hour cache writes, billed at twice the input price' },
  'fast-mode-2026-02-01': { action: 'refuse', why: 'fast mode, billed at a premium' },
  'compact-2026-01-12': { action: 'refuse', why: 'server-side compaction, extra model calls billed on top' },
  'code-execution-2025-05-22': { action: 'refuse', why: 'code execution, billed by container time' },
  'code-execution-2025-08-25': { action: 'refuse', why: 'code execution, billed by container time' },
  'web-fetch-2025-09-10': { action: 'refuse', why: 'a server tool billed on top of tokens' },
  'mcp-client-2025-04-04': { action: 'refuse', why: 'remote MCP tool calls billed on top of tokens' },
  'mcp-client-2025-11-20': { action: 'refuse', why: 'remote MCP tool calls billed on top of tokens' },
  'files-api-2025-04-14': { action: 'refuse', why: "files stored on the operator's account, of a size the request does not show" },
  'skills-2025-10-02': { action: 'refuse', why: 'skills run in a container billed by the hour' },
};

/** At most this many client betas are read; a longer list is refused. */
const MAX_BETAS = 64;

/**
 * The client's `anthropic-beta` header (one comma-separated value, or several headers) split into
 * what is forwarded and what is dropped; a priced beta is a 400 naming it.
 */
export function sortClientBetas(header: string | string[] | undefined): { forward: string[]; dropped: string[] } {
  const raw = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  if (raw.length > MAX_BETAS) throw badRequest(`anthropic-beta lists ${raw.length} betas; at most ${MAX_BETAS} are accepted`, { param: 'anthropic-beta' });
  const forward: string[] = [];
  const dropped: string[] = [];
  for (const beta of raw) {
    const policy = Object.hasOwn(MESSAGES_BETAS, beta) ? MESSAGES_BETAS[beta]! : undefined;
    if (policy?.action === 'refuse') throw badRequest(`anthropic-beta ${beta} is refused: ${policy.why}; remove it`, { param: 'anthropic-beta' });
    const list = policy?.action === 'forward' ? forward : dropped;
    // Only names of the documented form are ever echoed back or sent on.
    if (/^[A-Za-z0-9._-]{1,100}$/.test(beta) && !list.includes(beta)) list.push(beta);
  }
  return { forward, dropped };
}
