import { Pool } from 'undici';
import type { AdapterTimeouts, ProviderAdapter } from './adapter.ts';
import type { UpstreamTranslator } from '../protocols/upstream.ts';

export interface PostingAdapterOptions {
  name: string;
  upstream: UpstreamTranslator;
  /** The provider's base URL as configured. */
  baseUrl: string;
  /** The endpoint under the base URL's path, such as `/chat/completions`. */
  endpoint: string;
  /** Where embeddings requests go under the base URL's path (`/embeddings`); absent: none are served. */
  embeddingsEndpoint?: string;
  /** Sent with every request (content type, credentials, versions). */
  headers: Record<string, string>;
  /** The header that carries the gateway's request id, so provider-side logs can be matched with ours. */
  requestIdHeader: string;
  timeouts: AdapterTimeouts;
  connections: number;
}

/**
 * A provider reached by POSTing JSON over one undici pool, sized for concurrent streams: a stream
 * holds its connection for its whole life, so the pool needs as many connections as there are
 * streams in flight, not as many as requests per second. Every provider type is one of these with
 * its own path, headers and upstream translator.
 */
export function postingAdapter(o: PostingAdapterOptions): ProviderAdapter {
  const base = new URL(o.baseUrl);
  const under = (endpoint: string) => `${base.pathname.replace(/\/$/, '')}${endpoint}`;
  const path = under(o.endpoint);
  const pool = new Pool(base.origin, {
    connections: o.connections,
    pipelining: 1,
    connect: { timeout: o.timeouts.connectMs },
    headersTimeout: o.timeouts.firstByteMs,
    bodyTimeout: o.timeouts.idleMs,
    keepAliveTimeout: 30_000,
  });
  return {
    name: o.name,
    upstream: o.upstream,
    chat: (body, requestId, signal, headers) =>
      pool.request({ method: 'POST', path, headers: { ...withRequestHeaders(o.headers, headers), [o.requestIdHeader]: requestId }, body, signal }),
    // The same pool and headers as chat: one provider, one set of connections and credentials.
    ...(o.embeddingsEndpoint && {
      embeddings: (body: string, requestId: string, signal?: AbortSignal) =>
        pool.request({ method: 'POST', path: under(o.embeddingsEndpoint!), headers: { ...o.headers, [o.requestIdHeader]: requestId }, body, signal }),
    }),
    close: () => pool.close(),
    destroy: () => pool.destroy(),
  };
}

/** The provider's headers with a request's own; a name in both gets both lists, the provider's first, without repeats. */
function withRequestHeaders(base: Record<string, string>, extra: Record<string, string> | undefined): Record<string, string> {
  if (!extra) return base;
  const out = { ...base };
  for (const [name, value] of Object.entries(extra)) {
    const have = out[name];
    if (have === undefined) out[name] = value;
    else out[name] = [...new Set([...have.split(','), ...value.split(',')].map((v) => v.trim()).filter(Boolean))].join(',');
  }
  return out;
}
