import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';

/**
 * Anthropic's rule for extended thinking with tools: "When `thinking` is enabled, a final `assistant`
 * message must start with a thinking block (preceding the lastmost set of `tool_use` and `tool_result`
 * blocks)", else 400 (the fake Anthropic enforces it, in Anthropic's words). A Responses request with
 * `reasoning.effort` (Codex sends one on every turn) to a model served by Anthropic was sent with
 * thinking enabled, and the tool loop's next turn (by previous_response_id, or its items sent back
 * inline) carried the assistant's tool_use turn without the thinking block, which the Responses API has
 * no place for: every second turn was a 502. The same for a chat-completions client that does not send
 * `thinking_blocks` back. Such a continuation is now sent with thinking off.
 */
describe('reasoning effort with tools on an Anthropic model: the tool loop goes on', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  const post = (key: string, path: string, body: unknown) =>
    fetch(`${h.gw.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
    });
  const tools = [{ type: 'function', name: 'get_time', parameters: { type: 'object', properties: {} } }];
  /** One Responses turn with reasoning effort and the tool, as Codex sends every turn. */
  const turn = (key: string, fields: Record<string, unknown>) =>
    post(key, '/v1/responses', { model: 'anth/claude-test', max_output_tokens: 2000, reasoning: { effort: 'low' }, tools, ...fields });

  test('Responses, by previous_response_id: the continuation is answered, sent without thinking; a new user turn thinks again', async () => {
    resetProviders(h, { reasoning: 'I should call the tool.', toolCalls: [{ name: 'get_time', input: { tz: 'UTC' } }] });
    const w = await h.wallet(5_000_000);
    const first = await post(w.key, '/v1/responses', {
      model: 'anth/claude-test',
      max_output_tokens: 2000,
      reasoning: { effort: 'low' },
      tools,
      input: 'what time is it?',
    });
    const r1 = await first.json();
    assert.equal(first.status, 200, JSON.stringify(r1));
    assert.equal(h.anthropic.received[0]!.body.thinking?.type, 'enabled', 'the first turn thinks');
    const call = r1.output.find((o: { type: string }) => o.type === 'function_call');
    assert.ok(call, JSON.stringify(r1.output));

    resetProviders(h, { content: 'It is noon.' });
    const second = await turn(w.key, { previous_response_id: r1.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: '12:00' }] });
    const r2 = await second.json();
    assert.equal(second.status, 200, JSON.stringify(r2));
    assert.equal(h.anthropic.received[0]!.body.thinking, undefined, 'the continuation is sent without thinking');

    resetProviders(h, { content: 'Bye.' });
    const third = await turn(w.key, { previous_response_id: r2.id, input: 'thanks' });
    assert.equal(third.status, 200, await third.text());
    assert.equal(h.anthropic.received[0]!.body.thinking?.type, 'enabled', 'a turn that starts with the user thinks again');
  });

  test('chat completions: a client that sends the thinking blocks back keeps thinking on; one that drops them is answered without', async () => {
    resetProviders(h, { content: 'It is noon.' });
    const w = await h.wallet(5_000_000);
    const call = { id: 'toolu_1', type: 'function', function: { name: 'get_time', arguments: '{}' } };
    const messages = (assistant: Record<string, unknown>) => [
      { role: 'user', content: 'what time is it?' },
      { role: 'assistant', content: null, tool_calls: [call], ...assistant },
      { role: 'tool', tool_call_id: 'toolu_1', content: '12:00' },
    ];
    const body = { model: 'anth/claude-test', max_tokens: 2000, reasoning_effort: 'low', tools: [{ type: 'function', function: tools[0] }] };
    const dropped = await post(w.key, '/v1/chat/completions', { ...body, messages: messages({}) });
    assert.equal(dropped.status, 200, await dropped.text());
    assert.equal(h.anthropic.received.at(-1)!.body.thinking, undefined);
    const kept = await post(w.key, '/v1/chat/completions', {
      ...body,
      messages: messages({ thinking_blocks: [{ type: 'thinking', thinking: 'I should call the tool.', signature: 'sig' }] }),
    });
    assert.equal(kept.status, 200, await kept.text());
    assert.equal(h.anthropic.received.at(-1)!.body.thinking?.type, 'enabled');
  });
});
