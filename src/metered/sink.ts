/**
 * Where a chat answer is written: the one thing the chat pipeline knows about the client's
 * connection. src/http/inference/reply-sink.ts implements it over Fastify's reply; the chat code never sees
 * Fastify, so it can be read (and tested) as the money-and-bytes logic alone.
 */
export interface ResponseSink {
  /** The request's logger (provider failures, stalled clients). */
  readonly log: ChatLog;
  /** A header of the answer, set before it starts (the charge, the balance). */
  header(name: string, value: string | number): void;
  /**
   * A whole answer in one piece: `status`, then `body` as the content type says. A Buffer is sent as
   * it is (a large answer assembled from parts, which as one string would be copied again on the way
   * out); its sender sets the content type.
   */
  send(status: number, body: string | Buffer): void;
  /** Starts a 200 stream with these headers, added to those already set, and flushes them. */
  startStream(headers: Record<string, string>): void;
  /** Writes stream bytes; false when the client's buffer is full (then `waitForClient`). */
  write(text: string): boolean;
  /** Waits until the client took what is buffered, left, or accepted nothing for `idleMs`. */
  waitForClient(idleMs: number): Promise<ClientDrain>;
  /** Calls `listener` once the client's connection closes; returns the unsubscribe. */
  onClose(listener: () => void): () => void;
  /** Every byte was handed to the connection and the answer ended (a close after this is no disconnect). */
  readonly finished: boolean;
  /** The connection is gone: nothing more can be written. */
  readonly destroyed: boolean;
  /** Cuts the connection (a client that stopped reading). */
  destroy(): void;
  /** Ends the stream. */
  end(): void;
}

export type ClientDrain = 'drained' | 'closed' | 'stalled';

/** The logging the chat path needs: pino's signature, without depending on the web layer's logger. */
export interface ChatLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * Keeps a billed answer before its last byte goes out (stored Responses, src/stored-responses/):
 * called only after the settle applied, with the answer as the protocol's JSON (a stream's final
 * object); returns the JSON to deliver, which may differ (a Response that says whether it was
 * stored), and headers for a non-streaming answer. It never throws: a paid answer is delivered.
 */
export interface AnswerKeeper {
  keep(answerJson: string): Promise<KeptAnswer>;
}

export interface KeptAnswer {
  answer: string;
  headers: Record<string, string>;
}
