import type { Config } from '../../config/schema.ts';
import type { CatalogModel } from '../../providers/catalog.ts';
import { anthropicNativeUpstream } from '../../protocols/anthropic-messages/native-upstream.ts';
import { cacheTtlProblem } from '../../protocols/anthropic-messages/cache-control.ts';
import { thinkingFor } from '../../protocols/anthropic-messages/thinking.ts';
import { reservationFor } from '../../providers/pricing.ts';
import { badRequest } from '../../refusal.ts';
import type { ChatPlan } from './plan.ts';
import { promptBound, type NonTextParts } from '../prompt-bound.ts';
import { largestBound, type DeploymentPlan, type SkippedDeployment } from './deployment.ts';
import { estimateBody } from '../../protocols/anthropic-messages/estimate-body.ts';
import { checkFieldValues, fieldPolicy, sortClientBetas } from '../../protocols/anthropic-messages/field-policy.ts';

type Json = Record<string, any>;

/** Re-exported for the tests that check the native bound; the upstream translator (src/protocols/anthropic-messages/tools.ts) owns it. */
export { TOOL_SYSTEM_PROMPT_TOKENS } from '../../protocols/anthropic-messages/tools.ts';

/** Non-text blocks and the input kind a model must declare for each. */
const PART_KINDS: Readonly<Record<string, 'image' | 'file'>> = { image: 'image', document: 'file' };

/** What a native plan reads of the client's request beyond its body. */
export interface NativeOptions {
  /** The client's `anthropic-beta` header(s). */
  betas?: string | string[];
  /** A lower max_tokens than the model's limit (the balance fit, src/http/inference/balance-fit.ts). */
  maxTokensCap?: number;
}

/**
 * A Messages request for an Anthropic provider, planned without translation: the body sent is the
 * client's (fields as field-policy.ts allows them, the upstream model name, its max_tokens), so
 * prompt caching, signed thinking, system blocks and mid-conversation system messages reach
 * Anthropic as Claude Code sends them, with the client's price-neutral betas. The prompt bound is
 * taken on those very bytes, as for every other request.
 */
export function planNative(b: Json, model: CatalogModel, config: Pick<Config, 'chat'>, opts: NativeOptions = {}): ChatPlan {
  for (const field of Object.keys(b)) {
    if (fieldPolicy(field)?.native !== 'forward' && !model.extraFields.has(field)) {
      throw badRequest(
        `Unrecognized request argument supplied: ${field.slice(0, 100)}; this gateway forwards the Messages API fields listed in docs/api.md#forwarded-fields and the extensions its operator configured`,
        { param: field },
      );
    }
  }
  checkFieldValues(b);
  checkTools(b.tools);
  checkCacheControl(b);
  const betas = sortClientBetas(opts.betas);
  // Clients choose max_tokens for Claude's largest window (Claude Code asks 32,000 to 128,000): it is
  // lowered to the deployment's limit (and to the balance fit's cap), never refused for being high.
  const requested: number = b.max_tokens;
  const maxTokens = Math.min(requested, model.maxOutputTokens, opts.maxTokensCap ?? Infinity);
  let thinkingSent = b.thinking;
  if (b.thinking !== undefined && b.thinking !== null) {
    if (config.chat.reasoning === 'reject') throw badRequest('thinking is not accepted by this gateway; remove it from the request', { param: 'thinking' });
    // A budget chosen for the max_tokens asked stays below the one sent (Anthropic counts it inside).
    if (b.thinking.type === 'enabled' && Number.isInteger(b.thinking.budget_tokens) && b.thinking.budget_tokens >= maxTokens && maxTokens < requested) {
      thinkingSent = { ...b.thinking, budget_tokens: maxTokens - 1 };
    }
    const thinking = thinkingFor(thinkingSent, undefined, maxTokens);
    if (!thinking.ok) throw badRequest(thinking.message, { param: thinking.field });
  }
  const parts = measureBlocks(b, model);

  const sent: Json = {};
  for (const [field, value] of Object.entries(b)) sent[field] = value;
  sent.max_tokens = maxTokens;
  if (thinkingSent !== b.thinking) sent.thinking = thinkingSent;

  // The system prompt counts as one more message; tools add Anthropic's hidden tool prompt.
  const counted = { messages: [...(b.system ? [b.system] : []), ...b.messages], tools: b.tools };
  const routes: DeploymentPlan[] = [];
  const skipped: SkippedDeployment[] = [];
  for (const deployment of model.deployments) {
    // Untranslated bytes go only where they are the provider's own protocol.
    if (deployment.upstream !== 'anthropic') {
      skipped.push({ deployment, reason: `a Messages request is passed through untranslated, and ${deployment.provider} is not an Anthropic provider` });
      continue;
    }
    const forDeployment = { ...sent, model: deployment.upstreamName };
    const upstreamJson = JSON.stringify(forDeployment);
    const toolPrompt = anthropicNativeUpstream.hiddenPromptTokens?.(forDeployment) ?? 0;
    const promptUpperBound = Math.min(promptBound(counted, upstreamJson, model, parts) + toolPrompt, model.contextLength);
    routes.push({ deployment, upstreamBytes: Buffer.from(upstreamJson), upstream: anthropicNativeUpstream, promptUpperBound });
  }
  const promptUpperBound = largestBound(routes);
  return {
    model,
    stream: b.stream === true,
    clientWantsUsage: false,
    maxTokens,
    n: 1,
    promptUpperBound,
    parts,
    reservationUsdc: reservationFor(model, promptUpperBound, maxTokens, 1),
    upstreamBytes: routes[0]!.upstreamBytes,
    routes,
    skipped,
    upstreamBody: estimateBody(b),
    upstream: anthropicNativeUpstream,
    native: true,
    upstreamHeaders: betas.forward.length ? { 'anthropic-beta': betas.forward.join(',') } : undefined,
    responseHeaders: {
      ...(maxTokens < requested ? { 'x-tollgate-max-tokens': String(maxTokens) } : {}),
      ...(betas.dropped.length ? { 'x-tollgate-betas-dropped': betas.dropped.join(',') } : {}),
    },
  };
}

/**
 * Custom tools only. Anthropic's server tools (web search, web fetch, code execution) are billed
 * per use, and its own client tools (bash, text editor, computer use) add hidden prompts of
 * hundreds of tokens each: neither is in the catalog's prices or the request's bytes.
 */
function checkTools(tools: unknown): void {
  if (tools === undefined || tools === null) return;
  if (!Array.isArray(tools)) throw badRequest('tools must be an array of {name, description, input_schema}', { param: 'tools' });
  tools.forEach((t, i) => {
    if (typeof t?.name !== 'string' || (t.type !== undefined && t.type !== null && t.type !== 'custom')) {
      throw badRequest(
        `tools[${i}] must be a custom tool {name, description, input_schema}; Anthropic's server and built-in tools (${String(t?.type).slice(0, 50)}) are billed beyond tokens and not offered here`,
        { param: `tools[${i}]` },
      );
    }
  });
}

/** A one-hour cache write is priced above what the reservation and the bill know (cacheTtlProblem). */
function checkCacheControl(b: Json): void {
  const check = (block: unknown, path: string): void => {
    const problem = cacheTtlProblem(block, path);
    if (problem) throw badRequest(problem, { param: `${path}.cache_control` });
  };
  // Anthropic reads cache_control on system blocks, tool definitions and content blocks at any
  // depth (a text block in a search_result, in a tool_result, in a user turn): every block of every
  // nested `content` array is checked. Walked with a list, not by recursion, so no nesting depth
  // can overflow the stack.
  const pending: Array<[unknown, string]> = [];
  const each = (list: unknown, path: string) => {
    if (Array.isArray(list)) list.forEach((block, i) => pending.push([block, `${path}[${i}]`]));
  };
  check(b, 'request');
  each(b.system, 'system');
  each(b.tools, 'tools');
  (b.messages as Json[]).forEach((m, i) => {
    check(m, `messages[${i}]`);
    each(m?.content, `messages[${i}].content`);
  });
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [block, path] = next;
    check(block, path);
    each((block as Json | null)?.content, `${path}.content`);
  }
}

/**
 * Where an image or document may take its content from. Others (a Files API `file_id`, a document
 * made of content blocks that may hold images) have a size the request does not show: refused.
 */
const SOURCES: Readonly<Record<string, ReadonlySet<string>>> = {
  image: new Set(['base64', 'url']),
  document: new Set(['base64', 'url', 'text']),
};

/**
 * Image and document blocks, in a user turn or one level down in a tool result (where Anthropic
 * accepts them), at the model's declared token bound instead of their encoded data's bytes; a
 * kind the model does not declare, or a source whose size is not in the request, is refused.
 */
function measureBlocks(b: Json, model: CatalogModel): NonTextParts {
  const parts: NonTextParts = { tokens: 0, bytes: 0 };
  const visit = (blocks: unknown, path: string, inToolResult: boolean): void => {
    if (!Array.isArray(blocks)) return;
    blocks.forEach((block, j) => {
      const where = `${path}[${j}]`;
      if (block?.type === 'tool_result' && !inToolResult) return visit(block.content, `${where}.content`, true);
      const kind = typeof block?.type === 'string' && Object.hasOwn(PART_KINDS, block.type) ? PART_KINDS[block.type]! : undefined;
      if (!kind) return;
      const source = block.source?.type;
      if (!SOURCES[block.type]!.has(source))
        throw badRequest(`${where}.source.type must be one of ${[...SOURCES[block.type]!].join(', ')} on this gateway`, { param: `${where}.source` });
      // A text document is text, measured by its bytes like the rest.
      if (source === 'text') return;
      const bound = model.partTokenBounds[kind];
      if (bound === undefined)
        throw badRequest(
          `${where} is ${kind === 'image' ? 'an image' : 'a document'} block; model ${model.id} does not accept ${kind === 'image' ? 'images' : 'files'}; send text only, or use a model whose inputs list ${kind}`,
          { param: where },
        );
      parts.tokens += bound;
      // Only the encoded payload is replaced by the bound: a document's title and context are
      // rendered into the prompt as text, so their bytes stay counted.
      const data = block.source.data;
      if (typeof data === 'string') parts.bytes += Buffer.byteLength(JSON.stringify(data));
    });
  };
  (b.messages as Json[]).forEach((m, i) => visit(m.content, `messages[${i}].content`, false));
  return parts;
}
