import { parseJsonLoosely } from '../../json.ts';
import { USAGE_OBJECT, type StreamDecoder, type UpstreamTranslator, type WireEvent } from '../upstream.ts';
import type { InternalCompletion } from '../internal.ts';
import { readUsage } from './decode-usage.ts';
import { isOpenAICompletion } from './schemas.ts';

const DONE: WireEvent[] = [{ kind: 'done' }];

/**
 * OpenAI's chat completions: the internal form itself. Requests and answers pass through as they
 * are (no copy, no re-serialisation) and events are handed on as the provider wrote them; only an
 * event that mentions "error" is parsed, to tell a provider's error event from content, and one
 * that carries a usage object, to read it.
 */
export const openAIChatUpstream: UpstreamTranslator = {
  encodeRequest: (internal) => ({ ok: true, value: internal }),
  decodeAnswer(text) {
    // Text that is not JSON throws, as a broken answer always has (the caller words the failure).
    const raw: unknown = JSON.parse(text);
    if (!isOpenAICompletion(raw)) return { ok: false, problem: 'the provider sent a response that is not a chat completion' };
    // A failure after the 200 (OpenRouter's: an `error` beside the partial choice) is no answer.
    const failure = inBandError(raw);
    if (failure?.kind === 'error')
      return { ok: false, problem: `the provider reported an error${failure.providerMessage ? `: ${failure.providerMessage.slice(0, 300)}` : ''}` };
    // The provider's own object, not the schema's copy: it is handed on as it came. Its choices'
    // contents are read defensively (every leaf of InternalCompletion is unknown).
    const parsed = raw as InternalCompletion;
    return { ok: true, text, parsed, usage: readUsage(parsed.usage) };
  },
  streamDecoder: () => decoder,
};

/** An event that is not JSON: the provider's answer broke (a chunk cut by a proxy, a page written into the stream). */
const NOT_JSON: WireEvent[] = [{ kind: 'error', providerMessage: undefined, problem: 'the provider sent an event that is not JSON' }];

/** Stateless, so one instance serves every stream. */
const decoder: StreamDecoder = {
  decode(raw) {
    if (raw === '[DONE]') return DONE;
    // An event with an empty data line carries nothing (a keep-alive), as a comment would; a
    // [DONE] with trailing blanks is still the end, not an event that is not JSON.
    const trimmed = raw.trim();
    if (!trimmed) return [];
    if (trimmed === '[DONE]') return DONE;
    // Each event is parsed once, to know it is JSON: handed on as content, a broken one reached a
    // chat client as `data: <not JSON>` (the SDKs throw on it) and was lost from a translated answer,
    // and the [DONE] after it billed the answer in full.
    const chunk = parseJsonLoosely(raw);
    if (chunk === undefined) return NOT_JSON;
    // An event whose data spans several `data:` lines (a pretty-printed chunk) is still one JSON
    // value, but relayed with its newlines a chat client would read only its first line (spec 4.7
    // rule 1: each event line is `data: <JSON chunk>`): it is handed on written on one line.
    const data = raw.includes('\n') ? JSON.stringify(chunk) : raw;
    if (data.includes('"error"')) {
      const failure = inBandError(chunk);
      if (failure) return [failure];
    }
    if (USAGE_OBJECT.test(data)) {
      const choices: unknown[] = Array.isArray(chunk?.choices) ? chunk.choices : [];
      const usageOnly = Array.isArray(chunk?.choices) && choices.length === 0;
      const ends = usageOnly || choices.some((c) => (c as { finish_reason?: unknown } | null)?.finish_reason != null);
      return [{ kind: 'usage', data, usage: readUsage(chunk?.usage), usageOnly, ends, parsed: chunk }];
    }
    return [{ kind: 'chunk', data, parsed: chunk }];
  },
  promptUsage: () => null,
};

/**
 * A provider's failure reported inside its 200 stream, in each shape OpenAI-compatible upstreams
 * use: `{"error": {...}}` alone (OpenAI, SGLang, current vLLM), an `error` object beside `choices`
 * (OpenRouter's mid-stream error chunk, with `finish_reason: "error"`; aggregators relaying a
 * provider's capacity error beside `choices: []`), or vLLM's flat `{"object": "error", "message"}`.
 * Those that carry `choices` are still failures: relayed as content, the `[DONE]` that follows
 * them made a cut answer complete, and it was billed. An `"error": null` is no failure.
 */
function inBandError(o: unknown): WireEvent | null {
  if (!o || typeof o !== 'object' || Array.isArray(o)) return null;
  const chunk = o as { error?: unknown; object?: unknown; message?: unknown };
  if (chunk.error !== undefined && chunk.error !== null && chunk.error !== false) {
    const message = typeof chunk.error === 'string' ? chunk.error : (chunk.error as { message?: unknown }).message;
    return { kind: 'error', providerMessage: typeof message === 'string' ? message : undefined };
  }
  if (chunk.object === 'error') return { kind: 'error', providerMessage: typeof chunk.message === 'string' ? chunk.message : undefined };
  return null;
}
