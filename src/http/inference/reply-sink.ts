import type { FastifyReply, FastifyRequest } from 'fastify';
import type { InboundTranslator } from '../../protocols/inbound.ts';
import type { ChatExchange } from '../../metered/run.ts';
import type { ResponseSink } from '../../metered/sink.ts';
import { waitForClient } from './client-drain.ts';

/**
 * The chat pipeline's sink over a Fastify reply. A whole answer goes through Fastify's `send`
 * (its hooks and error handling still apply); a stream hijacks the reply and writes the raw
 * response, so no Fastify serialisation or buffering sits between the provider and the client.
 */
export function replySink(reply: FastifyReply): ResponseSink {
  const raw = reply.raw;
  return {
    log: reply.log,
    header(name, value) {
      void reply.header(name, value);
    },
    send(status, body) {
      void reply.code(status).send(body);
    },
    startStream(headers) {
      reply.hijack();
      raw.writeHead(200, { ...(reply.getHeaders() as Record<string, string>), ...headers });
      raw.flushHeaders();
    },
    write: (text) => raw.write(text),
    waitForClient: (idleMs) => waitForClient(raw, idleMs),
    onClose(listener) {
      raw.on('close', listener);
      return () => raw.off('close', listener);
    },
    get finished() {
      return raw.writableFinished;
    },
    get destroyed() {
      return raw.destroyed;
    },
    destroy: () => raw.destroy(),
    end: () => raw.end(),
  };
}

/** One chat request as the pipeline sees it: its id, where its answer goes, the protocol it speaks. */
export function exchangeOf(request: FastifyRequest, reply: FastifyReply, inbound: InboundTranslator): ChatExchange {
  return { requestId: request.id, sink: replySink(reply), inbound };
}
