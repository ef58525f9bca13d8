import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toAnthropicRequest } from '../../src/protocols/anthropic-messages/encode-request.ts';
import type { AnthropicRequest } from '../../src/protocols/anthropic-messages/types.ts';

/** A chat body as the plan leaves it: the model resolved and max_tokens explicit. */
const chat = (extra: Record<string, unknown> = {}) => ({ model: 'claude-sonnet-4-5', max_tokens: 2048, messages: [{ role: 'user', content: 'Hi' }], ...extra });

function translated(body: Record<string, unknown>): AnthropicRequest {
  const r = toAnthropicRequest(body);
  assert.ok(r.ok, `expected a translation, got the refusal ${JSON.stringify(r)}`);
  return r.value;
}

function refused(body: Record<string, unknown>, field: string, mentions: RegExp): void {
  const r = toAnthropicRequest(body);
  assert.equal(r.ok, false, `expected a refusal naming ${field}`);
  if (r.ok) return;
  assert.equal(r.field, field);
  assert.match(r.message, mentions);
}

const PNG = 'iVBORw0KGgo=';

describe('OpenAI chat request → Anthropic Messages request', () => {
  test('a plain conversation: system apart, turns as text blocks, limits and sampling carried over', () => {
    const out = translated(
      chat({
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'developer', content: [{ type: 'text', text: 'Answer in French.' }] },
          { role: 'user', content: 'Hi' },
        ],
        temperature: 0.3,
        top_p: 0.9,
        stop: 'END',
        user: 'wallet-7',
        stream: true,
        stream_options: { include_usage: true },
        seed: 4,
      }),
    );
    assert.deepEqual(out, {
      model: 'claude-sonnet-4-5',
      max_tokens: 2048,
      system: [
        { type: 'text', text: 'Be brief.' },
        { type: 'text', text: 'Answer in French.' },
      ],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
      stop_sequences: ['END'],
      temperature: 0.3,
      top_p: 0.9,
      metadata: { user_id: 'wallet-7' },
      stream: true,
    });
  });

  test('max_completion_tokens is the limit when max_tokens is absent', () => {
    const { max_tokens: _, ...body } = chat();
    assert.equal(translated({ ...body, max_completion_tokens: 300 }).max_tokens, 300);
  });

  test('consecutive turns of one role merge, as Anthropic requires alternation; empty turns drop out', () => {
    const out = translated(
      chat({
        messages: [
          { role: 'user', content: 'one' },
          { role: 'user', content: [{ type: 'text', text: 'two' }] },
          { role: 'assistant', content: '' },
          { role: 'assistant', content: 'three' },
          { role: 'user', content: '  ' },
          { role: 'assistant', content: 'four' },
        ],
      }),
    );
    assert.deepEqual(out.messages, [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'one' },
          { type: 'text', text: 'two' },
        ],
      },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'three' },
          { type: 'text', text: 'four' },
        ],
      },
    ]);
  });

  test('images: data URLs become base64 sources, http(s) URLs url sources; a PDF file part becomes a document', () => {
    const out = translated(
      chat({
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is this?', cache_control: { type: 'ephemeral' } },
              { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}`, detail: 'high' } },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
              { type: 'file', file: { filename: 'a.pdf', file_data: 'data:application/pdf;base64,JVBERi0=' } },
            ],
          },
        ],
      }),
    );
    assert.deepEqual(out.messages[0]!.content, [
      { type: 'text', text: 'What is this?', cache_control: { type: 'ephemeral' } },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
      { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } },
    ]);
  });

  test('tools, tool calls and tool results: function tools, tool_use blocks with parsed input, tool_result user turns first', () => {
    const out = translated(
      chat({
        tools: [
          {
            type: 'function',
            function: { name: 'weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
          },
          { type: 'function', function: { name: 'time' } },
        ],
        tool_choice: 'required',
        parallel_tool_calls: false,
        messages: [
          { role: 'user', content: 'Weather and time in Paris?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } },
              { id: 'call_2', type: 'function', function: { name: 'time', arguments: '' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: '18°C' },
          { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: '14:00' }] },
          { role: 'user', content: 'Thanks' },
        ],
      }),
    );
    assert.deepEqual(out.tools, [
      { name: 'weather', description: 'Weather for a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } },
      { name: 'time', input_schema: { type: 'object', properties: {} } },
    ]);
    assert.deepEqual(out.tool_choice, { type: 'any', disable_parallel_tool_use: true });
    assert.deepEqual(out.messages, [
      { role: 'user', content: [{ type: 'text', text: 'Weather and time in Paris?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'call_2', name: 'time', input: {} },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: '18°C' },
          { type: 'tool_result', tool_use_id: 'call_2', content: [{ type: 'text', text: '14:00' }] },
          { type: 'text', text: 'Thanks' },
        ],
      },
    ]);
  });

  test('tool_choice in Anthropic words: auto, none, required → any, a named function → tool', () => {
    const tools = [{ type: 'function', function: { name: 'f' } }];
    assert.deepEqual(translated(chat({ tools, tool_choice: 'auto' })).tool_choice, { type: 'auto' });
    assert.deepEqual(translated(chat({ tools, tool_choice: 'none' })).tool_choice, { type: 'none' });
    assert.deepEqual(translated(chat({ tools, tool_choice: 'required' })).tool_choice, { type: 'any' });
    assert.deepEqual(translated(chat({ tools, tool_choice: { type: 'function', function: { name: 'f' } } })).tool_choice, { type: 'tool', name: 'f' });
    assert.deepEqual(translated(chat({ tools, parallel_tool_calls: false })).tool_choice, { type: 'auto', disable_parallel_tool_use: true });
    assert.equal(translated(chat({ tools })).tool_choice, undefined);
  });

  test('an assistant turn sends its signed thinking blocks back first; reasoning_content alone is not sent', () => {
    const thinking = { type: 'thinking', thinking: 'Paris is in France.', signature: 'sig_1' };
    const out = translated(
      chat({
        messages: [
          { role: 'user', content: 'Weather?' },
          {
            role: 'assistant',
            content: null,
            reasoning_content: 'Paris is in France.',
            thinking_blocks: [thinking],
            tool_calls: [{ id: 'c', type: 'function', function: { name: 'w', arguments: '{}' } }],
          },
          { role: 'tool', tool_call_id: 'c', content: 'sunny' },
        ],
      }),
    );
    assert.deepEqual(out.messages[1]!.content, [thinking, { type: 'tool_use', id: 'c', name: 'w', input: {} }]);
  });

  test('thinking passes through; reasoning_effort becomes a budget kept below max_tokens; none and stop lists', () => {
    assert.deepEqual(translated(chat({ thinking: { type: 'enabled', budget_tokens: 1500 } })).thinking, { type: 'enabled', budget_tokens: 1500 });
    assert.deepEqual(translated(chat({ thinking: { type: 'disabled' } })).thinking, { type: 'disabled' });
    assert.deepEqual(translated(chat({ max_tokens: 32000, reasoning_effort: 'low' })).thinking, { type: 'enabled', budget_tokens: 1024 });
    assert.deepEqual(translated(chat({ max_tokens: 32000, reasoning_effort: 'medium' })).thinking, { type: 'enabled', budget_tokens: 4096 });
    assert.deepEqual(translated(chat({ max_tokens: 32000, reasoning_effort: 'high' })).thinking, { type: 'enabled', budget_tokens: 16384 });
    assert.deepEqual(translated(chat({ max_tokens: 8000, reasoning_effort: 'high' })).thinking, { type: 'enabled', budget_tokens: 7999 });
    assert.equal(translated(chat({ reasoning_effort: 'none' })).thinking, undefined);
    assert.deepEqual(translated(chat({ stop: ['A', 'B'] })).stop_sequences, ['A', 'B']);
  });

  test('fields neither side decides on (an operator extraField such as top_k) go through; OpenAI-only hints are dropped', () => {
    const out = translated(
      chat({
        top_k: 40,
        metadata: { team: 'x' },
        prompt_cache_key: 'k',
        store: false,
        service_tier: 'auto',
        modalities: ['text'],
        n: 1,
        response_format: { type: 'text' },
        logprobs: false,
        presence_penalty: 0,
      }),
    );
    assert.equal(out.top_k, 40);
    for (const f of ['metadata', 'prompt_cache_key', 'store', 'service_tier', 'modalities', 'n', 'response_format', 'logprobs', 'presence_penalty'])
      assert.equal(f in out, false, f);
  });
});

describe('requests Anthropic cannot honour are refused as values naming the field', () => {
  const cases: [string, Record<string, unknown>, string, RegExp][] = [
    ['n above 1', chat({ n: 2 }), 'n', /one answer per request/],
    [
      'json_schema response_format',
      chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: {} } } }),
      'response_format',
      /"json_schema".*not supported/,
    ],
    ['json_object response_format', chat({ response_format: { type: 'json_object' } }), 'response_format', /"json_object"/],
    ['no max_tokens', { model: 'm', messages: [{ role: 'user', content: 'Hi' }] }, 'max_tokens', /required by Anthropic/],
    ['temperature above 1', chat({ temperature: 1.5 }), 'temperature', /0 to 1/],
    ['logprobs', chat({ logprobs: true }), 'logprobs', /not supported/],
    ['top_logprobs', chat({ top_logprobs: 3 }), 'top_logprobs', /not supported/],
    ['logit_bias', chat({ logit_bias: { 50256: -100 } }), 'logit_bias', /not supported/],
    ['presence_penalty', chat({ presence_penalty: 0.5 }), 'presence_penalty', /not supported/],
    ['frequency_penalty', chat({ frequency_penalty: 0.5 }), 'frequency_penalty', /not supported/],
    ['verbosity', chat({ verbosity: 'low' }), 'verbosity', /not supported/],
    ['legacy functions', chat({ functions: [{ name: 'f' }] }), 'functions', /not supported/],
    ['legacy function_call', chat({ function_call: 'auto' }), 'function_call', /not supported/],
    ['whitespace stop sequence', chat({ stop: ['\n'] }), 'stop', /non-whitespace/],
    ['stop that is not text', chat({ stop: [1] }), 'stop', /strings/],
    [
      'thinking budget at max_tokens',
      chat({ max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 2048 } }),
      'thinking.budget_tokens',
      /below max_tokens \(2048\)/,
    ],
    ['thinking budget under 1024', chat({ thinking: { type: 'enabled', budget_tokens: 500 } }), 'thinking.budget_tokens', /from 1024/],
    ['thinking that is not an object', chat({ thinking: true }), 'thinking', /type: "enabled"/],
    ['reasoning_effort with max_tokens too small', chat({ max_tokens: 1024, reasoning_effort: 'low' }), 'reasoning_effort', /raise max_tokens/],
    ['unknown reasoning_effort', chat({ max_tokens: 9000, reasoning_effort: 'extreme' }), 'reasoning_effort', /one of none, minimal, low, medium, high/],
    ['a non-function tool', chat({ tools: [{ type: 'web_search' }] }), 'tools[0]', /function tools only/],
    ['tools that are not a list', chat({ tools: {} }), 'tools', /array/],
    ['a malformed tool_choice', chat({ tool_choice: { type: 'function' } }), 'tool_choice', /"required"/],
    [
      'audio input',
      chat({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AA==', format: 'wav' } }] }] }),
      'messages[0].content[0]',
      /audio/,
    ],
    ['an unknown part type', chat({ messages: [{ role: 'user', content: [{ type: 'video' }] }] }), 'messages[0].content[0]', /"video"/],
    [
      'a part whose text is not a string',
      chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 5 }] }] }),
      'messages[0].content[0]',
      /must be a string/,
    ],
    ['content that is neither text nor parts', chat({ messages: [{ role: 'user', content: 5 }] }), 'messages[0].content', /string or an array/],
    [
      'an image type Anthropic lacks',
      chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/tiff;base64,AA==' } }] }] }),
      'messages[0].content[0]',
      /image\/tiff/,
    ],
    [
      'an image URL of another scheme',
      chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://x/y.png' } }] }] }),
      'messages[0].content[0]',
      /http\(s\) URL/,
    ],
    [
      'an image without a URL',
      chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }),
      'messages[0].content[0]',
      /url must be a string/,
    ],
    [
      'a file that is not a PDF',
      chat({ messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }] }),
      'messages[0].content[0]',
      /PDF/,
    ],
    [
      'an image in the system prompt',
      chat({
        messages: [
          { role: 'system', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] },
          { role: 'user', content: 'Hi' },
        ],
      }),
      'messages[0].content',
      /system prompt/,
    ],
    [
      'an image in a tool result',
      chat({
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'tool', tool_call_id: 'c', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] },
        ],
      }),
      'messages[1].content',
      /tool result/,
    ],
    ['a tool result without its call id', chat({ messages: [{ role: 'tool', content: 'x' }] }), 'messages[0].tool_call_id', /tool_call_id/],
    [
      'tool call arguments that are not JSON',
      chat({ messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{bad' } }] }] }),
      'messages[0].tool_calls[0].function.arguments',
      /JSON object/,
    ],
    [
      'tool call arguments that are not an object',
      chat({ messages: [{ role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '[1]' } }] }] }),
      'messages[0].tool_calls[0].function.arguments',
      /JSON object/,
    ],
    [
      'a tool call without a name',
      chat({ messages: [{ role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: {} }] }] }),
      'messages[0].tool_calls[0]',
      /function.name/,
    ],
    ['tool_calls that are not a list', chat({ messages: [{ role: 'assistant', tool_calls: {} }] }), 'messages[0].tool_calls', /array/],
    [
      'thinking blocks without a signature',
      chat({ messages: [{ role: 'assistant', content: 'x', thinking_blocks: [{ type: 'thinking', thinking: 'x' }] }] }),
      'messages[0].thinking_blocks',
      /signature/,
    ],
    ['the deprecated function role', chat({ messages: [{ role: 'function', name: 'f', content: 'x' }] }), 'messages[0].role', /deprecated/],
    ['an unknown role', chat({ messages: [{ role: 'critic', content: 'x' }] }), 'messages[0].role', /"critic"/],
    ['a system prompt alone', chat({ messages: [{ role: 'system', content: 'Be brief.' }] }), 'messages', /at least one user or assistant message/],
  ];
  for (const [name, body, field, mentions] of cases) test(name, () => refused(body, field, mentions));
});
