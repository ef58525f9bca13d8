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
    // The provider's own object, not the schema's copy: it is handed on as it came. Its choices'
    // contents are read defensively (every leaf of InternalCompletion is unknown).
    const parsed = raw as InternalCompletion;
    return { ok: true, text, parsed, usage: readUsage(parsed.usage) };
  },
  streamDecoder: () => decoder,
};

/** Stateless, so one instance serves every stream. */
const decoder: StreamDecoder = {
  decode(data) {
    if (data === '[DONE]') return DONE;
    if (data.includes('"error"')) {
      const o = parseJsonLoosely(data);
      if (o && typeof o === 'object' && 'error' in o && !('choices' in o)) {
        const message: unknown = o.error?.message;
        return [{ kind: 'error', providerMessage: typeof message === 'string' ? message : undefined }];
      }
    }
    if (USAGE_OBJECT.test(data)) {
      const chunk = parseJsonLoosely(data);
      const choices: unknown[] = Array.isArray(chunk?.choices) ? chunk.choices : [];
      const usageOnly = Array.isArray(chunk?.choices) && choices.length === 0;
      const ends = usageOnly || choices.some((c) => (c as { finish_reason?: unknown } | null)?.finish_reason != null);
      return [{ kind: 'usage', data, usage: readUsage(chunk?.usage), usageOnly, ends }];
    }
    return [{ kind: 'chunk', data }];
  },
  promptUsage: () => null,
};
