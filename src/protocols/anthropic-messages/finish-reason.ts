/**
 * Anthropic's `stop_reason` as OpenAI's `finish_reason`. `pause_turn` (a server tool paused a
 * long turn) ends this answer like a normal stop; `refusal` is the model declining, which OpenAI
 * clients know as content_filter; running out of context is running out of length.
 */
const FINISH: Readonly<Record<string, string>> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};

export function finishReason(stopReason: string | null | undefined): string | null {
  if (stopReason === null || stopReason === undefined) return null;
  return Object.hasOwn(FINISH, stopReason) ? FINISH[stopReason]! : 'stop';
}
