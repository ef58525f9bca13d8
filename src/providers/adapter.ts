import type { Dispatcher } from 'undici';
import type { UpstreamWire } from './wire.ts';

/**
 * What the chat pipeline needs from a provider: its wire format (how the internal request and
 * answers translate, wire.ts) and the transport (send the encoded body, get the raw HTTP response).
 */
export interface ProviderAdapter {
  readonly name: string;
  readonly wire: UpstreamWire;
  /**
   * POSTs an encoded request (`body`, from `wire.encodeRequest`). Rejects on connect failure and timeouts; any HTTP status resolves.
   * `requestId` is the gateway's id for the request, sent along so provider-side logs can be
   * matched with ours.
   */
  chat(body: string, requestId: string, signal?: AbortSignal): Promise<Dispatcher.ResponseData>;
  close(): Promise<void>;
  /** Drops every connection at once, cutting requests still streaming (shutdown after the grace). */
  destroy(): Promise<void>;
}

export interface AdapterTimeouts {
  connectMs: number;
  firstByteMs: number;
  idleMs: number;
}
