import { Pool } from 'undici';
import type { ProviderConfig } from '../config/schema.ts';
import type { AdapterTimeouts, ProviderAdapter } from './adapter.ts';

/**
 * Any API that speaks OpenAI's chat completions protocol (OpenAI, Groq, Together, DeepSeek,
 * OpenRouter, vLLM, Ollama, Gemini's OpenAI endpoint, …). One undici pool per provider, sized for
 * concurrent streams: a stream holds its connection for its whole life, so the pool needs as many
 * connections as there are streams in flight, not as many as requests per second.
 */
export function openAICompatible(name: string, config: ProviderConfig, apiKey: string | undefined, timeouts: AdapterTimeouts, connections: number): ProviderAdapter {
  const base = new URL(config.baseUrl);
  const path = `${base.pathname.replace(/\/$/, '')}/chat/completions`;
  const pool = new Pool(base.origin, {
    connections,
    pipelining: 1,
    connect: { timeout: timeouts.connectMs },
    headersTimeout: timeouts.firstByteMs,
    bodyTimeout: timeouts.idleMs,
    keepAliveTimeout: 30_000,
  });
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;

  return {
    name,
    // OpenAI's own name for a caller-chosen request id; other providers ignore it.
    chat: (body, requestId, signal) => pool.request({ method: 'POST', path, headers: { ...headers, 'x-client-request-id': requestId }, body, signal }),
    close: () => pool.close(),
    destroy: () => pool.destroy(),
  };
}
