import type { ChatCompletion, ToolCall } from '../../src/protocols/anthropic-messages/decode-answer.ts';
import type { ChatCompletionChunk } from '../../src/protocols/anthropic-messages/decode-stream.ts';

/**
 * Folds OpenAI chat.completion.chunk objects into the chat.completion they stand for, the way the
 * openai SDK's stream helpers do: content and reasoning concatenated, tool calls gathered by their
 * `index`, the last finish_reason, the usage chunk's usage.
 */
export function assembleChunks(chunks: ChatCompletionChunk[]): ChatCompletion {
  const first = chunks[0]!;
  let content = '';
  let reasoning = '';
  let finish: string | null = null;
  const calls: ToolCall[] = [];
  const thinkingBlocks: unknown[] = [];
  let usage: ChatCompletion['usage'];
  for (const chunk of chunks) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      const d = choice.delta as Record<string, any>;
      if (typeof d.content === 'string') content += d.content;
      if (typeof d.reasoning_content === 'string') reasoning += d.reasoning_content;
      if (Array.isArray(d.thinking_blocks)) thinkingBlocks.push(...d.thinking_blocks);
      for (const t of d.tool_calls ?? []) {
        const call = (calls[t.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
        if (t.id) call.id = t.id;
        if (t.function?.name) call.function.name = t.function.name;
        call.function.arguments += t.function?.arguments ?? '';
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  const message: ChatCompletion['choices'][0]['message'] = { role: 'assistant', content: content || (calls.length ? null : ''), refusal: null };
  if (calls.length) message.tool_calls = calls;
  if (reasoning) message.reasoning_content = reasoning;
  if (thinkingBlocks.length) message.thinking_blocks = thinkingBlocks as never;
  const out: ChatCompletion = {
    id: first.id,
    object: 'chat.completion',
    created: first.created,
    model: first.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
  };
  if (usage) out.usage = usage;
  return out;
}
