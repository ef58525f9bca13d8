import type { Dispatcher } from 'undici';

/** The end of an over-long answer kept while it is drained: its usage object and then some. */
const TAIL_BYTES = 4096;

/**
 * A provider's answer read with a bound: its text, or, past `maxBytes`, how many bytes came and (when
 * it was drained to its end) its last bytes, where a provider writes its usage.
 */
export type BoundedAnswer = { text: string } | { over: { bytes: number; tail: string | null } };

/**
 * Reads `body` as UTF-8 text up to `maxBytes`. Past that, the text is dropped and the rest is read
 * on only up to `drainUpTo` bytes in all (0: the connection is dropped at once), its last
 * TAIL_BYTES kept: an answer the provider billed whose usage is still wanted. Bytes are counted as
 * they come: a Content-Length is not trusted, and a body that never ends is never held.
 */
export async function readBoundedAnswer(body: Dispatcher.ResponseData['body'], maxBytes: number, drainUpTo = 0): Promise<BoundedAnswer> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  let tail: Buffer | null = null;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (tail) {
      tail = keepEnd(Buffer.concat([tail, chunk]));
    } else if (bytes > maxBytes) {
      tail = keepEnd(Buffer.concat([...chunks.slice(-2), chunk]));
      chunks.length = 0;
    } else {
      chunks.push(chunk);
      continue;
    }
    if (bytes > drainUpTo) {
      body.destroy();
      return { over: { bytes, tail: null } };
    }
  }
  if (tail) return { over: { bytes, tail: tail.toString('utf8') } };
  return { text: chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, bytes).toString('utf8') };
}

const keepEnd = (b: Buffer): Buffer => (b.length > TAIL_BYTES ? b.subarray(b.length - TAIL_BYTES) : b);
