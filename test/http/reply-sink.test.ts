import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { replySink } from '../../src/http/inference/reply-sink.ts';

/**
 * The sink the chat pipeline writes through, over a real Fastify reply on a real socket: what the
 * pipeline sets is what the client receives, and a client that leaves is reported.
 */
describe('replySink', () => {
  let app: FastifyInstance;
  let url: string;
  const closes: { finished: boolean; destroyed: boolean }[] = [];
  let leftResolve: () => void;
  const left = new Promise<void>((r) => (leftResolve = r));

  before(async () => {
    app = Fastify();
    app.post('/whole', async (_req, reply) => {
      const sink = replySink(reply);
      sink.header('content-type', 'application/json; charset=utf-8');
      sink.header('x-charged', 42);
      sink.send(200, '{"ok": true}');
      return reply;
    });
    app.post('/stream', async (_req, reply) => {
      const sink = replySink(reply);
      sink.header('x-set-before', 'yes');
      sink.startStream({ 'content-type': 'text/event-stream; charset=utf-8' });
      sink.write('data: one\n\n');
      sink.write('data: two\n\n');
      sink.end();
      await new Promise((r) => setImmediate(r));
      assert.equal(sink.finished, true);
    });
    app.post('/hang', async (_req, reply) => {
      const sink = replySink(reply);
      sink.startStream({ 'content-type': 'text/event-stream' });
      sink.write('data: first\n\n');
      const unsubscribeUnused = sink.onClose(() => closes.push({ finished: true, destroyed: true }));
      unsubscribeUnused();
      sink.onClose(() => {
        closes.push({ finished: sink.finished, destroyed: sink.destroyed });
        leftResolve();
      });
    });
    url = await app.listen({ host: '127.0.0.1', port: 0 });
  });
  after(() => app.close());

  test('a whole answer: the status, the headers set before it, the body as given', async () => {
    const res = await fetch(`${url}/whole`, { method: 'POST' });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-charged'), '42');
    assert.equal(res.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(await res.text(), '{"ok": true}', 'sent as written, not re-serialised');
  });

  test('a stream: 200 with the headers set before it and its own, the writes in order, then the end', async () => {
    const res = await fetch(`${url}/stream`, { method: 'POST' });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-set-before'), 'yes');
    assert.equal(res.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.equal(await res.text(), 'data: one\n\ndata: two\n\n');
  });

  test('a client that leaves mid-stream is reported once, as not finished, to the listeners still subscribed', async () => {
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${url}/hang`, { method: 'POST' }, (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', () => undefined);
      req.once('error', reject);
      req.end();
    });
    await left;
    assert.deepEqual(closes, [{ finished: false, destroyed: true }]);
  });
});
