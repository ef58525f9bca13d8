import type { AdapterTimeouts, ProviderAdapter } from './adapter.ts';
import { openAIChatUpstream } from '../protocols/openai-chat/upstream.ts';
import { postingAdapter } from './posting-adapter.ts';

/**
 * Any API that speaks OpenAI's chat completions protocol (OpenAI, Groq, Together, DeepSeek,
 * OpenRouter, vLLM, Ollama, Gemini's OpenAI endpoint, …): the internal form, passed through.
 */
export function openAICompatible(
  name: string,
  config: { baseUrl: string },
  apiKey: string | undefined,
  timeouts: AdapterTimeouts,
  connections: number,
): ProviderAdapter {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  // OpenAI's own name for a caller-chosen request id; other providers ignore it.
  return postingAdapter({
    name,
    upstream: openAIChatUpstream,
    baseUrl: config.baseUrl,
    endpoint: '/chat/completions',
    embeddingsEndpoint: '/embeddings',
    headers,
    requestIdHeader: 'x-client-request-id',
    timeouts,
    connections,
  });
}
