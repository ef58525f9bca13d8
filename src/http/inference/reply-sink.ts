import type { FastifyReply, FastifyRequest } from 'fastify';
import type { InboundTranslator } from '../../protocols/inbound.ts';
import type { ChatExchange } from '../../metered/run.ts';
import type { ClientDrain, ResponseSink } from '../../metered/sink.ts';
import { waitForClient } from './client-drain.ts';

/**
 * The chat pipeline's sink over a Fastify reply. A whole answer goes through Fastify's `send`
 * (its hooks and error handling still apply); a stream hijacks the reply and writes the raw
 * response, so no Fastify serialisation or buffering sits between the provider and the client.
 * A class, not an object literal of closures: one is made per request, and its methods then live
 * once on the prototype instead of a dozen closures and two accessors being built for each.
 */
class ReplySink implements ResponseSink {
  readonly log: FastifyReply['log'];
  private readonly raw: FastifyReply['raw'];

  constructor(private readonly reply: FastifyReply) {
    this.log = reply.log;
    this.raw = reply.raw;
  }

  header(name: string, value: string | number): void {
    void this.reply.header(name, value);
  }

  send(status: number, body: string | Buffer): void {
    void this.reply.code(status).send(body);
  }

  startStream(headers: Record<string, string>): void {
    this.reply.hijack();
    this.raw.writeHead(200, { ...(this.reply.getHeaders() as Record<string, string>), ...headers });
    this.raw.flushHeaders();
  }

  write(text: string): boolean {
    return this.raw.write(text);
  }

  waitForClient(idleMs: number): Promise<ClientDrain> {
    return waitForClient(this.raw, idleMs);
  }

  onClose(listener: () => void): () => void {
    this.raw.on('close', listener);
    return () => this.raw.off('close', listener);
  }

  get finished(): boolean {
    return this.raw.writableFinished;
  }

  get destroyed(): boolean {
    return this.raw.destroyed;
  }

  destroy(): void {
    this.raw.destroy();
  }

  end(): void {
    this.raw.end();
  }
}

export function replySink(reply: FastifyReply): ResponseSink {
  return new ReplySink(reply);
}

/** One chat request as the pipeline sees it: its id, where its answer goes, the protocol it speaks. */
export function exchangeOf(request: FastifyRequest, reply: FastifyReply, inbound: InboundTranslator): ChatExchange {
  return { requestId: request.id, sink: replySink(reply), inbound };
}
