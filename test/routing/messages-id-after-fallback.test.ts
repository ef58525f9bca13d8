import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { routingSuite, type RoutingHarness } from '../support/routing-harness.ts';
import { readServed } from '../support/sse.ts';
import { waitForUsageRow } from '../support/usage-rows.ts';

/*
 * A Messages client (Claude Code, the Anthropic SDK) on a model whose own provider is
 * OpenAI-compatible is translated; when its Anthropic fallback serves, the answer's message id is
 * the one Anthropic issued ("msg_…"). The defect: the translation prefixed every id with "msg_"
 * (right for an OpenAI id, "chatcmpl-…"), so after a fallback the client read "msg_msg_…", an id
 * Anthropic never issued, in the JSON answer and in message_start.
 */
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };

describe('a translated Messages request served by the Anthropic fallback', () => {
  const harness = routingSuite('sqlite', USAGE);
  let h: RoutingHarness;
  beforeEach(() => {
    h = harness();
    h.fake.behaviour = { failStatus: 503 };
  });

  for (const stream of [false, true]) {
    test(`${stream ? 'stream' : 'JSON'}: the message id is Anthropic's own`, async () => {
      const w = await h.wallet(1_000_000);
      const res = await fetch(`${h.gw.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': w.key, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'fake/to-claude', max_tokens: 100, stream, messages: [{ role: 'user', content: 'hi' }] }),
      });
      assert.equal(res.status, 200);
      const served = await readServed(res);
      assert.equal(served.deployment, 'anth/claude-fallback');
      const id = stream ? JSON.parse(served.events.find((e) => e.includes('"message_start"'))!).message.id : JSON.parse(served.text).id;
      assert.match(id, /^msg_[A-Za-z0-9]+$/, `an id as Anthropic writes one: ${id}`);
      assert.doesNotMatch(id, /^msg_msg_/);
      if (stream) await waitForUsageRow(h, w.keyId);
    });
  }
});
