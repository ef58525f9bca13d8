import { parseJsonLoosely } from '../../json.ts';
import { mayNameACharge, namesACharge, spliceCharge, withCharge, type Charge } from '../charge.ts';
import type { InboundTranslator } from '../inbound.ts';
import type { InternalCompletion, InternalUsage, Usage } from '../internal.ts';
import { openAIUsageOf, shownUsage } from './encode-usage.ts';

const DONE = 'data: [DONE]\n\n';

/**
 * POST /v1/chat/completions: OpenAI's protocol is the internal form, so requests and events pass
 * through as they are. The answer's `usage` and the stream's usage chunk gain the charge
 * (src/protocols/charge.ts), so those two are written again. The usage chunk reaches the client
 * only if it asked for it (`stream_options.include_usage`; the gateway always asks the provider, to
 * bill): a chunk with no choices breaks clients that did not ask, as OpenAI's own opt-in says.
 */
export const openAIChatInbound: InboundTranslator = {
  path: '/v1/chat/completions',
  openaiCompatible: true,
  decodeRequest: (body) => body,
  encodeAnswer: (internalJson, parsed, _plan, usage, charge) => answerWithCharge(internalJson, parsed, usage, charge),
  streamEncoder: (plan) => {
    // The provider's usage-only chunk is held until the settle, then written with the charge.
    let heldUsage: string | null = null;
    // The last chunk as sent, for the id, model and time of a usage chunk the gateway writes itself.
    let lastChunk: string | null = null;
    return {
      chunk(data, usageOnly) {
        // A content chunk may carry usage too (some providers): it must not state a charge either.
        if (!usageOnly) {
          lastChunk = data;
          return `data: ${mayNameACharge(data) ? chunkWithCharge(data, undefined) : data}\n\n`;
        }
        // A second usage-only chunk (rare): the earlier one goes out as the provider wrote it, without a charge.
        const earlier = heldUsage !== null && plan.clientWantsUsage ? `data: ${chunkWithCharge(heldUsage, undefined)}\n\n` : '';
        heldUsage = data;
        return earlier;
      },
      // The event clients already parse for a provider failure (docs/api.md "Streaming").
      failure: (message) => `data: ${JSON.stringify({ error: { message, type: 'upstream_error' } })}\n\n${DONE}`,
      end(billed, _answer, charge) {
        if (!plan.clientWantsUsage) return DONE;
        // The provider's usage-only chunk, unless the bill was estimated (its figures could not be
        // billed from): then the billed usage, in that chunk's id and model.
        if (heldUsage !== null && !billed?.estimated) return `data: ${chunkWithCharge(heldUsage, charge)}\n\n${DONE}`;
        if (heldUsage !== null) lastChunk = heldUsage;
        // No usage-only chunk from the provider (it reported none and the bill was estimated, or it
        // put its usage on a content chunk): the client asked for one, and it is where the charge is
        // read, so the gateway writes it from the billed usage.
        return billed ? `data: ${usageChunkOf(lastChunk, billed, charge)}\n\n${DONE}` : DONE;
      },
    };
  },
};

/**
 * The answer with the charge in its `usage` (the billed usage when the provider reported none).
 * Unchanged, byte for byte, without a charge (a unit test's call: the pipeline hands out a JSON
 * answer only once its settle applied).
 */
function answerWithCharge(internalJson: string, parsed: InternalCompletion, billed: Usage | undefined, charge: Charge | undefined): string {
  if (!charge) return internalJson;
  if (billed?.estimated && parsed?.usage) return JSON.stringify({ ...parsed, usage: withCharge(shownUsage(parsed.usage, billed), charge) });
  const spliced = parsed?.usage && typeof parsed.usage === 'object' ? spliceCharge(internalJson, charge) : null;
  if (spliced !== null) return spliced;
  const usage: InternalUsage | Record<string, unknown> = parsed?.usage ?? (billed ? openAIUsageOf(billed) : {});
  return JSON.stringify({ ...parsed, usage: withCharge(usage, charge) });
}

/** A usage-only chunk for the billed usage, with the id, model and time of the stream's last chunk. */
function usageChunkOf(lastChunk: string | null, billed: Usage, charge: Charge | undefined): string {
  const last = (parseJsonLoosely(lastChunk ?? '') ?? {}) as { id?: unknown; created?: unknown; model?: unknown };
  return JSON.stringify({
    id: last.id ?? '',
    object: 'chat.completion.chunk',
    created: last.created ?? Math.floor(Date.now() / 1000),
    model: last.model ?? '',
    choices: [],
    usage: withCharge(openAIUsageOf(billed), charge),
  });
}

/** The provider's usage-only chunk with the charge (and without any charge fields of its own). */
function chunkWithCharge(data: string, charge: Charge | undefined): string {
  const chunk = parseJsonLoosely(data) as { usage?: object | null } | undefined;
  if (!chunk || typeof chunk !== 'object' || !chunk.usage || typeof chunk.usage !== 'object') return data;
  if (!charge && !namesACharge(chunk.usage)) return data;
  return JSON.stringify({ ...chunk, usage: withCharge(chunk.usage, charge) });
}
