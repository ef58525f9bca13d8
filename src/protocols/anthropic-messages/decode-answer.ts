import type { AnthropicResponse, ContentBlock } from './types.ts';
import { finishReason } from './finish-reason.ts';
import { reportedUsage, type TranslatedUsage } from './decode-usage.ts';

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: [
    {
      index: 0;
      message: {
        role: 'assistant';
        content: string | null;
        refusal: null;
        tool_calls?: ToolCall[];
        reasoning_content?: string;
        thinking_blocks?: ContentBlock[];
      };
      logprobs: null;
      finish_reason: string | null;
    },
  ];
  usage?: TranslatedUsage;
}

/**
 * An Anthropic message as an OpenAI chat.completion. Text blocks join into `content`; tool_use
 * blocks become `tool_calls` with JSON-string arguments; thinking text is `reasoning_content`
 * (DeepSeek's name, which the gateway already bills and estimates) and the signed blocks ride
 * along as `thinking_blocks` so a client can send them back with its tool results.
 */
export function fromAnthropicResponse(msg: AnthropicResponse, created = Math.floor(Date.now() / 1000)): ChatCompletion {
  let text = '';
  let reasoning = '';
  const toolCalls: ToolCall[] = [];
  const thinkingBlocks: ContentBlock[] = [];
  for (const block of msg.content ?? []) {
    if (block.type === 'text') text += block.text;
    else if (block.type === 'tool_use')
      toolCalls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } });
    else if (block.type === 'thinking' || block.type === 'redacted_thinking') {
      if (block.type === 'thinking') reasoning += block.thinking;
      thinkingBlocks.push(block);
    }
  }
  const message: ChatCompletion['choices'][0]['message'] = { role: 'assistant', content: text || (toolCalls.length ? null : ''), refusal: null };
  if (toolCalls.length) message.tool_calls = toolCalls;
  if (reasoning) message.reasoning_content = reasoning;
  if (thinkingBlocks.length) message.thinking_blocks = thinkingBlocks;
  const completion: ChatCompletion = {
    id: msg.id,
    object: 'chat.completion',
    created,
    model: msg.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason(msg.stop_reason) }],
  };
  const usage = reportedUsage(msg.usage);
  if (usage) completion.usage = usage;
  return completion;
}
