import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { until } from '../support/until.ts';
import { openStorage } from '../../src/storage/database.ts';

/**
 * A streaming client that stops reading, and a shutdown in the middle of a
 * stream. Attacker: a key holder whose client connects, asks for a stream and never reads, to hold
 * a reservation and a provider connection for ever (four of them starved every other wallet of a
 * provider limited to four connections); and the operator's own shutdown, which voided a stream
 * after its content had been delivered.
 */

// An answer far larger than the kernel buffers between the gateway and a client that does not
// read (about 10 MB of events), so the gateway's writes back up and it has to wait for the client.
const LONG_ANSWER = Array.from({ length: 40_000 }, (_, i) => `word${i} `).join('');
// The provider's figures, so the charge is known without counting the long answer's tokens.
const USAGE = { prompt_tokens: 20, completion_tokens: 1000 };
const CHARGE = 2424; // 20 × 1.2 + 1000 × 2.4 micro-USDC (chat-small, 20% markup)
const FUNDS = 1_000_000;
const MESSAGES = [{ role: 'user', content: 'tell me a long story' }];

/** Sends a streaming chat request over a raw socket, then never reads the answer. */
function stalledStream(baseUrl: string, key: string): Promise<Socket> {
  const { hostname, port } = new URL(baseUrl);
  const body = JSON.stringify({ model: 'fake/chat-small', messages: MESSAGES, stream: true });
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}:${port}\r\nauthorization: Bearer ${key}\r\n` +
          `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      socket.pause();
      resolve(socket);
    });
    socket.on('error', () => undefined); // the gateway resets it; that is the point
    socket.once('error', reject);
  });
}

async function reservationOf(h: ChatHarness, keyId: number) {
  return h.gw.services.storage.db.selectFrom('reservations').selectAll().where('api_key_id', '=', keyId).executeTakeFirst();
}

async function usageOf(h: ChatHarness, keyId: number) {
  return h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', keyId).executeTakeFirstOrThrow();
}

for (const engine of ENGINES) {
  describe(`a client that stops reading (${engine})`, () => {
    let h: ChatHarness;
    const sockets: Socket[] = [];
    after(async () => {
      for (const s of sockets) s.destroy();
      await h?.stop();
    });

    test('it is cut after idleTimeoutSeconds, the stream is drained and what was produced is charged', async () => {
      h = await startChatHarness(engine, { chat: { idleTimeoutSeconds: 1, drainTimeoutSeconds: 30 } });
      h.fake.behaviour = { content: LONG_ANSWER, usage: USAGE };
      const w = await h.wallet(FUNDS);
      sockets.push(await stalledStream(h.gw.url, w.key));

      // Waiting for 'drain' for ever would leave the reservation pending.
      await until(async () => (await reservationOf(h, w.keyId))?.status === 'settled', 'the stalled stream is settled', 60_000);
      const usage = await usageOf(h, w.keyId);
      assert.equal(usage.status, 'client_disconnected');
      assert.equal(Number(usage.charged_usdc), CHARGE);
      assert.equal(Number(usage.completion_tokens), USAGE.completion_tokens, "charged from the provider's usage, read by the drain");
      assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS - CHARGE, locked_usdc: 0, available_usdc: FUNDS - CHARGE });
      assert.match(h.gw.logs(), /streaming client accepted no bytes/);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}

test('a client that reads slowly but keeps reading is not cut', async () => {
  // Progress is seen at the gateway's socket, behind the kernel's buffers (megabytes on loopback),
  // which ask for more only once a good part of them is free: a few seconds of idle leave room.
  const h = await startChatHarness('sqlite', { chat: { idleTimeoutSeconds: 3, drainTimeoutSeconds: 30 } });
  const sockets: Socket[] = [];
  try {
    h.fake.behaviour = { content: LONG_ANSWER, usage: USAGE };
    const w = await h.wallet(FUNDS);
    const socket = await stalledStream(h.gw.url, w.key);
    sockets.push(socket);
    // Reads 256 KB, then nothing for 200 ms, and again: slower than the gateway writes (so its
    // buffers fill and it waits), but never silent for a whole idle period.
    let answer = '';
    let sinceBreak = 0;
    socket.on('data', (c: Buffer) => {
      answer += c.toString('latin1');
      sinceBreak += c.length;
      if (sinceBreak < 256 * 1024) return;
      sinceBreak = 0;
      socket.pause();
      setTimeout(() => socket.resume(), 200);
    });
    socket.resume();
    await until(() => answer.includes('data: [DONE]'), 'the whole answer is read', 120_000);
    await until(async () => (await reservationOf(h, w.keyId))?.status === 'settled', 'the slow stream is settled', 60_000);
    assert.equal((await usageOf(h, w.keyId)).status, 'ok');
    assert.ok(answer.includes('word39999'), 'the client got the whole answer');
    assert.doesNotMatch(h.gw.logs(), /streaming client accepted no bytes/);
    await assertLedgerConsistent(h.gw.services.storage.db);
  } finally {
    for (const s of sockets) s.destroy();
    await h.stop();
  }
});

describe('stalled clients and a provider limited to four connections', () => {
  let h: ChatHarness;
  const sockets: Socket[] = [];
  after(async () => {
    for (const s of sockets) s.destroy();
    await h?.stop();
  });

  test("four stalled streams do not make another wallet's request hang", async () => {
    h = await startChatHarness('sqlite', { chat: { idleTimeoutSeconds: 1, drainTimeoutSeconds: 30 } }, { fakeProvider: { maxConnections: 4 } });
    h.fake.behaviour = { content: LONG_ANSWER, usage: USAGE };
    const stalled = await Promise.all(Array.from({ length: 4 }, () => h.wallet(FUNDS)));
    for (const w of stalled) sockets.push(await stalledStream(h.gw.url, w.key));
    await until(async () => h.fake.received.length === 4, 'the four streams reach the provider', 60_000);

    // Every provider connection is now held by a client that does not read.
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 5 } };
    const other = await h.wallet(FUNDS);
    // Unbounded, this would wait for a provider connection for ever; the timeout only ends the test.
    const answer = await h
      .client(other.key)
      .chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }, { timeout: 60_000 });
    assert.equal(answer.choices.length, 1);

    for (const w of stalled) await until(async () => (await reservationOf(h, w.keyId))?.status === 'settled', 'each stalled stream is settled', 60_000);
    for (const w of stalled) assert.equal(Number((await usageOf(h, w.keyId)).charged_usdc), CHARGE);
    await assertLedgerConsistent(h.gw.services.storage.db);
  });
});

for (const engine of ENGINES) {
  test(`shutdown in the middle of a stream charges what was delivered (${engine})`, async () => {
    const h = await startChatHarness(engine);
    let stopped: Promise<void> | undefined;
    try {
      const w = await h.wallet(FUNDS);
      // A stream of 100 words, one every 100 ms: it cannot finish within the grace below.
      h.fake.behaviour = { content: LONG_ANSWER.split(' ').slice(0, 100).join(' '), chunkDelayMs: 100 };
      const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/chat-small', messages: MESSAGES, stream: true }),
      });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      let received = '';
      while ((received.match(/"content":"word/g) ?? []).length < 5) {
        const { value, done } = await reader.read();
        if (done) throw new Error('the stream ended before the shutdown');
        received += new TextDecoder().decode(value);
      }
      const reading = (async () => {
        for (;;) if ((await reader.read().catch(() => ({ done: true }))).done) return;
      })();

      stopped = h.gw.stop({ graceMs: 300 });
      await stopped;
      await reading;

      const storage = openStorage(h.gw.config.database.url);
      try {
        const reservation = await storage.db.selectFrom('reservations').selectAll().where('api_key_id', '=', w.keyId).executeTakeFirstOrThrow();
        const usage = await storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).executeTakeFirstOrThrow();
        // The break this guards against: voided, content delivered, nothing charged.
        assert.equal(reservation.status, 'settled');
        assert.equal(usage.status, 'shutdown');
        assert.equal(Number(usage.estimated), 1, 'the provider sent no usage yet: counted from what was streamed');
        assert.ok(Number(usage.completion_tokens) >= 5, `at least the delivered words are counted, got ${usage.completion_tokens}`);
        assert.ok(Number(reservation.charged_usdc) > 0);
        assert.equal(Number(usage.charged_usdc), Number(reservation.charged_usdc));
        await assertLedgerConsistent(storage.db);
      } finally {
        await storage.close();
      }
    } finally {
      await (stopped ?? h.gw.stop({ graceMs: 0 }));
      await h.fake.close();
    }
  });
}
