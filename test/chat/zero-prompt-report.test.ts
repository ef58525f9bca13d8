import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { clientSuite, readSse } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

/*
 * attack: billedUsage estimates the output of a report with 0 output beside delivered text (a
 * proxy with counting off) and kept its prompt side "as reported". The same proxy reports
 * prompt_tokens 0 too: the prompt, however long, was billed 0. Compared with no usage at all.
 */
const PROMPT = 'context '.repeat(5000);
const content = 'lorem '.repeat(50).trimEnd();
const body = { model: 'chat-small', messages: [{ role: 'user', content: PROMPT }] };

describe('a {0, 0} report beside a delivered answer', () => {
  const harness = clientSuite({});

  for (const stream of [false, true]) {
    test(`${stream ? 'stream' : 'JSON'}: the ~5000-token prompt is billed as when no usage was reported`, async () => {
      const h = harness();
      const charge = async (behaviour: object) => {
        h.fake.behaviour = { content, ...behaviour };
        const w = await h.wallet(1_000_000);
        if (stream) {
          const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
            body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
          });
          assert.equal(res.status, 200);
          await readSse(res);
        } else {
          const res = await call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${w.key}` });
          assert.equal(res.status, 200, res.text);
        }
        await h.gw.assertLedger();
        return 1_000_000 - Number((await h.balance(w.account)).balance_usdc);
      };
      const none = await charge({ omitUsage: true });
      const zeros = await charge({ usage: { prompt_tokens: 0, completion_tokens: 0 } });
      assert.ok(zeros >= none * 0.9, `no usage: charged ${none}; usage {0, 0}: charged ${zeros}`);
    });
  }
});
