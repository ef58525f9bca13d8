import { parseJsonLoosely } from '../../json.ts';
import type { StreamDecoder, UpstreamTranslator, WireEvent } from '../upstream.ts';

const DONE: WireEvent[] = [{ kind: 'done' }];

/**
 * OpenAI's chat completions: the internal form itself. Requests and answers pass through as they
 * are (no copy, no re-serialisation) and events are handed on as the provider wrote them; only an
 * event that mentions "error" is parsed, to tell a provider's error event from content.
 */
export const openAIChatUpstream: UpstreamTranslator = {
  encodeRequest: (internal) => ({ ok: true, value: internal }),
  decodeAnswer(text) {
    const parsed = JSON.parse(text);
    if (!parsed || typeof parsed !== 'object' || !Array.isArray(parsed.choices)) return { ok: false, problem: 'the provider sent a response that is not a chat completion' };
    return { ok: true, text, parsed };
  },
  streamDecoder: () => decoder,
};

/** Stateless, so one instance serves every stream. */
const decoder: StreamDecoder = {
  decode(data) {
    if (data === '[DONE]') return DONE;
    if (data.includes('"error"')) {
      const o = parseJsonLoosely(data);
      if (!!o && typeof o === 'object' && 'error' in o && !('choices' in o)) {
        const message: unknown = o.error?.message;
        return [{ kind: 'error', providerMessage: typeof message === 'string' ? message : undefined }];
      }
    }
    return [{ kind: 'chunk', data }];
  },
  promptUsage: () => null,
};
