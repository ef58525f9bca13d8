import type { Catalog } from '../providers/catalog.ts';
import { countedBody } from '../protocols/anthropic-messages/estimate-body.ts';
import { checkMessagesRequest } from '../protocols/anthropic-messages/request-checks.ts';
import { fieldPolicy } from '../protocols/anthropic-messages/field-policy.ts';
import { badRequest } from '../refusal.ts';
import { resolveModel } from './plan/plan.ts';
import { countTokens } from './usage-estimate.ts';
import type { CatalogModel } from '../providers/catalog.ts';

type Json = Record<string, any>;

/**
 * Claude's tokenizers count more tokens than o200k for the same text; a count for an Anthropic
 * model is raised by this factor, so that a client managing its context by it (Claude Code
 * compacts the conversation when it nears the window) errs towards compacting early, never towards
 * overflowing the window.
 */
export const CLAUDE_COUNT_MARGIN = 1.25;
/** Anthropic's own count adds a few tokens per message and for the request, as chat templates do. */
const PER_MESSAGE = 3;
const PER_REQUEST = 3;

/**
 * The system prompt Anthropic adds to a request with tools, which its text does not show, by
 * tool_choice: 346 tokens for auto or none, 313 for any or a named tool, on the Claude 4 family and
 * later (Anthropic's tool-use pricing docs; earlier models differ, and a request without tools gets
 * none). Anthropic bills it as input, so a count for a model it may serve includes it.
 */
export const TOOL_USE_PROMPT_TOKENS = { free: 346, forced: 313 } as const;

function toolUsePrompt(b: Json): number {
  if (!Array.isArray(b.tools) || b.tools.length === 0) return 0;
  const forced = ['any', 'tool'].includes(b.tool_choice?.type);
  return forced ? TOOL_USE_PROMPT_TOKENS.forced : TOOL_USE_PROMPT_TOKENS.free;
}

/**
 * POST /v1/messages/count_tokens, answered by the gateway itself: no provider is called and nothing is
 * reserved or billed. The count is the o200k tokenizer's over every block of the request
 * (countable-blocks.ts: text, thinking, redacted thinking, tool inputs and results, search results,
 * documents, blocks of other types as their JSON) and the tool definitions, with each image or
 * non-text document at the model's declared bound; for a model any of whose deployments is on
 * Anthropic it is raised by CLAUDE_COUNT_MARGIN, and a request with tools counts Anthropic's tool-use
 * system prompt (TOOL_USE_PROMPT_TOKENS). It is an estimate, and the answer says so in `x-tollgate-usage-estimated: true`.
 * `allowed` (the key's model list) runs before the count. The text is counted in the CPU lane
 * (src/cpu-lane.ts), so a large body never holds the event loop.
 */
export async function countMessageTokens(
  body: unknown,
  catalog: Catalog,
  allowed: (model: CatalogModel) => void = () => {},
): Promise<{ model: CatalogModel; inputTokens: number }> {
  const b = checkMessagesRequest(body, false);
  const model = resolveModel(catalog, b.model);
  // The key's model list is checked before any text is counted: a key that may not use the model gets nothing counted.
  allowed(model);
  refuseUnknownFields(b, model);
  const { body: read, images, files } = countedBody(b);
  const messages = read.messages as Json[];
  const text = [
    ...messages.map((m) => m.content as string),
    ...['tools', 'tool_choice'].filter((f) => read[f] !== undefined).map((f) => JSON.stringify(read[f])),
  ].join('\n');
  const parts = images * (model.partTokenBounds.image ?? 0) + files * (model.partTokenBounds.file ?? 0);
  const counted = (await countTokens(text)) + PER_MESSAGE * messages.length + PER_REQUEST;
  // Any deployment may serve the request (a fallback, a weighted draw): one on Anthropic counts with Claude's margin.
  const onAnthropic = model.deployments.some((d) => d.upstream === 'anthropic');
  const margin = onAnthropic ? CLAUDE_COUNT_MARGIN : 1;
  // The tool-use prompt is in Claude's own tokens already: added after the margin.
  return { model, inputTokens: Math.ceil(counted * margin) + parts + (onAnthropic ? toolUsePrompt(b) : 0) };
}

/**
 * The same rule as /v1/messages: a top-level field the Messages API as served here does not know
 * (and the operator did not list in the provider's extraFields) is a 400 naming it, so a client
 * learns of a typo or an unsupported field from its count, not from the request it then sends.
 * Every known field is taken, even one /v1/messages refuses for its price: counting bills nothing.
 */
function refuseUnknownFields(b: Json, model: CatalogModel): void {
  const unknown = Object.keys(b).find((field) => !fieldPolicy(field) && !model.extraFields.has(field));
  if (unknown !== undefined) {
    const name = unknown.slice(0, 100);
    const where = 'count_tokens takes the Messages API fields listed in docs/api.md#forwarded-fields';
    throw badRequest(`Unrecognized request argument supplied: ${name}; ${where}`, { param: name });
  }
}
