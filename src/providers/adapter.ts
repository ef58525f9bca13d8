import type { Dispatcher } from 'undici';

/** What the chat route needs from a provider: send the body, get the raw HTTP response back. */
export interface ProviderAdapter {
  readonly name: string;
  /**
   * POSTs a chat completion. Rejects on connect failure and timeouts; any HTTP status resolves.
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
