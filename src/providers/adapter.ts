import type { Dispatcher } from 'undici';
import type { UpstreamTranslator } from '../protocols/upstream.ts';

/**
 * What the chat pipeline needs from a provider: its upstream translator (how the internal request and
 * answers translate, src/protocols/upstream.ts) and the transport (send the encoded body, get the raw HTTP response).
 */
export interface ProviderAdapter {
  readonly name: string;
  readonly upstream: UpstreamTranslator;
  /**
   * POSTs an encoded request (`body`, from `upstream.encodeRequest`, serialised to UTF-8 bytes: the HTTP client keeps
   * the body it is given until the answer ends, so the bytes the plan already holds cost a held stream nothing more,
   * where a string would be copied). Rejects on connect failure and timeouts; any HTTP status resolves.
   * `requestId` is the gateway's id for the request, sent along so provider-side logs can be
   * matched with ours. `headers`: the request's own (a native Messages request's betas); a header
   * the provider already sends is combined with it as a comma-separated list.
   */
  chat(body: Buffer, requestId: string, signal?: AbortSignal, headers?: Record<string, string>): Promise<Dispatcher.ResponseData>;
  /**
   * POSTs an OpenAI embeddings request (already serialised) to the provider's `/embeddings`;
   * absent for a provider type that serves no embeddings (Anthropic). Resolves on any HTTP status.
   */
  embeddings?(body: string, requestId: string, signal?: AbortSignal): Promise<Dispatcher.ResponseData>;
  close(): Promise<void>;
  /** Drops every connection at once, cutting requests still streaming (shutdown after the grace). */
  destroy(): Promise<void>;
}

export interface AdapterTimeouts {
  connectMs: number;
  firstByteMs: number;
  idleMs: number;
}
