import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startAnthropicHarness, resetProviders, type AnthropicHarness } from '../support/anthropic-harness.ts';

/**
 * Anthropic streams a tool call that takes no arguments as content_block_start {input: {}} followed
 * by a single input_json_delta whose partial_json is "" (LiteLLM #5063, vercel/ai #10747, magentic
 * #408, langchain #23911). The JSON answer of the same call is translated to arguments "{}"
 * (decode-answer.ts: JSON.stringify(block.input ?? {})), but the stream translation dropped the empty
 * delta and never wrote the start's `input`, so OpenAI clients received arguments "" (not JSON):
 * JSON.parse("") throws in every SDK that parses tool arguments (openai-node's runTools, the AI SDK,
 * the Agents SDK, Codex). Now the stop of a tool block that streamed no arguments sends its input.
 */
describe('a no-argument Anthropic tool call, streamed to OpenAI-protocol clients', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  const behave = () =>
    resetProviders(h, {
      toolCalls: [{ name: 'get_time', input: {} }],
      // What Anthropic really sends for an empty input: one input_json_delta with partial_json "".
      rewriteAnswer: (json) => json.replace('"partial_json":"{}"', '"partial_json":""'),
    });
  const tools = [{ type: 'function', function: { name: 'get_time', description: 'the time', parameters: { type: 'object', properties: {} } } }];

  const post = (key: string, path: string, body: unknown) =>
    fetch(`${h.gw.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify(body),
    });

  test('chat completions: the JSON answer says "{}", the streamed one must too', async () => {
    behave();
    const w = await h.wallet(5_000_000);
    const body = { model: 'anth/claude-test', max_tokens: 200, messages: [{ role: 'user', content: 'time?' }], tools };
    const json = await (await post(w.key, '/v1/chat/completions', body)).json();
    assert.equal(json.choices[0].message.tool_calls[0].function.arguments, '{}');

    const text = await (await post(w.key, '/v1/chat/completions', { ...body, stream: true })).text();
    let args = '';
    let name = '';
    for (const block of text.split('\n\n')) {
      if (!block.startsWith('data: {')) continue;
      const chunk = JSON.parse(block.slice(6));
      for (const call of chunk.choices?.[0]?.delta?.tool_calls ?? []) {
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
    }
    assert.equal(name, 'get_time');
    assert.doesNotThrow(() => JSON.parse(args), `streamed tool arguments are not JSON: ${JSON.stringify(args)}`);
    assert.equal(args, '{}');
  });

  test('responses: the streamed function_call item carries arguments that parse', async () => {
    behave();
    const w = await h.wallet(5_000_000);
    const rtools = [{ type: 'function', name: 'get_time', parameters: { type: 'object', properties: {} } }];
    const text = await (
      await post(w.key, '/v1/responses', { model: 'anth/claude-test', max_output_tokens: 200, input: 'time?', tools: rtools, stream: true })
    ).text();
    const done = text.split('\n\n').find((b) => b.startsWith('event: response.completed'));
    assert.ok(done, text.slice(-300));
    const response = JSON.parse(done!.slice(done!.indexOf('data: ') + 6));
    const call = response.response.output.find((o: any) => o.type === 'function_call');
    assert.ok(call, JSON.stringify(response.response.output));
    assert.doesNotThrow(() => JSON.parse(call.arguments), `function_call.arguments is not JSON: ${JSON.stringify(call.arguments)}`);
  });
});
