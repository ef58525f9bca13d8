import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { startChatHarness, readSse, type ChatHarness } from '../support/chat-harness.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 10, completion_tokens: 10 };

/**
 * Each transport failure is named for what happened, in the non-streamed 502 and in the streamed
 * error event alike: the fix differs (the provider's health, the operator's baseUrl, a slow model).
 */
describe('provider failures say what happened', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { chat: { firstByteTimeoutSeconds: 1, idleTimeoutSeconds: 1 } });
  });
  beforeEach(() => {
    h.fake.behaviour = { usage: USAGE };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  async function ask(harness: ChatHarness, stream: boolean): Promise<string> {
    const w = await harness.wallet(FUNDS);
    const res = await fetch(`${harness.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], stream }),
    });
    let message: string;
    if (stream) {
      assert.equal(res.status, 200);
      const events = await readSse(res);
      assert.equal(events.at(-1), '[DONE]');
      const event = JSON.parse(events.at(-2)!);
      assert.equal(event.error.type, 'upstream_error', "the streamed event keeps OpenAI's shape");
      message = event.error.message;
    } else {
      assert.equal(res.status, 502);
      const body = await res.json();
      assert.equal(body.error, 'UPSTREAM_ERROR');
      message = body.message;
    }
    assert.deepEqual(await harness.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS }, 'nothing charged');
    return message;
  }

  for (const stream of [false, true]) {
    const mode = stream ? 'streamed' : 'not streamed';

    test(`${mode}: a connection the provider drops before answering is "closed the connection"`, async () => {
      h.fake.behaviour = { dropConnection: true };
      assert.equal(await ask(h, stream), 'the provider closed the connection; nothing was charged');
    });

    test(`${mode}: no answer in time is a timeout`, async () => {
      h.fake.behaviour = { usage: USAGE, delayMs: 2500 };
      // Not streamed, the answer's headers wait for the whole answer: the client is told how to ask for a long one.
      const advice = stream
        ? ''
        : ' (an answer that is not streamed starts only once fully generated: for a long one, set stream: true or ask for fewer output tokens)';
      assert.equal(await ask(h, stream), `the provider timed out before answering${advice}; nothing was charged`);
    });

    test(`${mode}: a provider nobody listens for "could not be reached"`, async () => {
      const nowhere = await startChatHarness('sqlite', {
        providers: { fake: { baseUrl: 'http://127.0.0.1:9/v1' }, other: { baseUrl: 'http://127.0.0.1:9/v1' } },
      });
      try {
        assert.equal(await ask(nowhere, stream), 'the provider could not be reached; nothing was charged');
        await nowhere.gw.assertLedger();
      } finally {
        await nowhere.stop();
      }
    });
  }

  test('streamed: a connection reset mid-answer is "closed the connection", not "could not be reached"', async () => {
    h.fake.behaviour = { usage: USAGE, cutAfterChunks: 2 };
    assert.equal(await ask(h, true), 'the provider closed the connection; nothing was charged');
  });

  test('streamed: a provider that stops sending mid-answer is a timeout', async () => {
    h.fake.behaviour = { usage: USAGE, chunkDelayMs: 1500 };
    assert.equal(await ask(h, true), 'the provider timed out: it stopped sending mid-answer; nothing was charged');
  });
});
