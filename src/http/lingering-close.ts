import type { FastifyInstance } from 'fastify';

export interface LingerBounds {
  /** How long the rest of a body is read and thrown away after the answer. */
  maxMs: number;
  /** How many bytes of it at most. */
  maxBytes: number;
}

/**
 * Early answers (401 and 429 before the body is read, 413) leave the client still sending. Closing
 * the socket then makes the kernel answer the unread bytes with a reset, and clients (fetch, the
 * openai SDK) report "connection error" instead of the answer. So, like nginx's lingering close,
 * the rest of the body is read and discarded, never buffered or parsed, within bounds; past them
 * the connection is cut. A client that sends its whole body keeps its keep-alive connection.
 */
export function lingerAfterEarlyAnswers(app: FastifyInstance, bounds: LingerBounds): void {
  app.addHook('onSend', async (request, reply, payload) => {
    // `complete`: the parser has seen the end of the body, so nothing more will arrive.
    if (request.raw.complete) return payload;
    // Fastify asks for a close after a body it could not read (413); Node would then close the
    // socket as soon as the answer is written, with the client's bytes unread. Discarding them
    // keeps the HTTP stream in step, so the connection may be kept.
    if (reply.getHeader('connection') === 'close') reply.removeHeader('connection');
    const raw = request.raw;
    reply.raw.once('finish', () => {
      // Node drains an unread request after the answer (IncomingMessage._dump); count what arrives.
      let discarded = 0;
      const cut = () => {
        clearTimeout(timer);
        // (In-process inject() requests have a stand-in socket without destroy.)
        raw.socket?.destroy?.();
      };
      const timer = setTimeout(cut, bounds.maxMs);
      timer.unref();
      raw.on('data', (chunk: Buffer) => {
        discarded += chunk.length;
        if (discarded > bounds.maxBytes) cut();
      });
      raw.once('end', () => clearTimeout(timer));
      raw.once('close', () => clearTimeout(timer));
      raw.resume();
    });
    return payload;
  });
}
