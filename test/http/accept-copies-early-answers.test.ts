import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Agent } from 'undici';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { pacedBody } from '../support/paced-body.ts';

// Early answers (a 401 before the body is read, a 413 for a body over the route's limit) reach a
// client still sending only because the gateway reads and discards the rest of the body before
// closing (src/http/lingering-close.ts). Most new connections in a burst are accepted on the copies
// of the listening socket (src/http/accept-watchers.ts), so the same must hold on those: a socket a
// copy accepted that closed early would reset, and the client would report a connection error
// instead of its answer. Each case opens its connections at once, so the copies take part (checked),
// and paces every body (256 KiB pieces 5 ms apart) so the answer always comes mid-body.

describe('early answers on connections the accept copies took', () => {
  let h: ChatHarness;
  let key: string;
  before(async () => {
    h = await startChatHarness('sqlite');
    key = (await h.wallet(1_000_000)).key;
  });
  after(() => h.stop());

  /**
   * `count` requests at once, each on a connection of its own (a fresh pool, no idle connection to
   * reuse): the status and error code each client read, or the connection error it got instead.
   */
  async function burst(count: number, authorization: string, size: number): Promise<{ answers: string[]; byCopies: number }> {
    const pool = new Agent({ connections: count });
    const before = h.gw.acceptedByCopies();
    try {
      const answers = await Promise.all(
        Array.from({ length: count }, async () => {
          const init = {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization, 'content-length': String(size) },
            body: pacedBody(size),
            duplex: 'half',
            dispatcher: pool,
          };
          try {
            const res = await fetch(`${h.gw.url}/v1/chat/completions`, init as RequestInit);
            return `${res.status} ${(await res.json()).error}`;
          } catch (err) {
            return `connection error: ${(err as Error & { cause?: { code?: string } }).cause?.code ?? (err as Error).message}`;
          }
        }),
      );
      return { answers, byCopies: h.gw.acceptedByCopies() - before };
    } finally {
      await pool.close();
    }
  }

  test('16 clients with a bad key, each still sending 2 MiB, all read their 401', async () => {
    const { answers, byCopies } = await burst(16, 'Bearer sk-not-a-key', 2 * 1024 * 1024);
    assert.deepEqual(answers, Array(16).fill('401 UNAUTHORIZED'));
    assert.ok(byCopies > 0, 'the copies accepted none of the 16 connections: the case did not test them');
  });

  test('8 clients each still sending 11 MiB to a 10 MiB route all read their 413, and nothing is charged', async () => {
    const { answers, byCopies } = await burst(8, `Bearer ${key}`, 11 * 1024 * 1024);
    assert.deepEqual(answers, Array(8).fill('413 PAYLOAD_TOO_LARGE'));
    assert.ok(byCopies > 0, 'the copies accepted none of the 8 connections: the case did not test them');
    await h.gw.assertLedger();
  });
});
