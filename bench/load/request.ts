import type { Target } from '../targets.ts';

/** The chat body every target gets; `stream` asks for the usage chunk too, as Tollgate always does. */
export function chatBody(model: string, stream: boolean): string {
  return JSON.stringify({
    model,
    messages: [{ role: 'user', content: 'Say twenty words.' }],
    max_tokens: 64,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

export function chatHeaders(target: Target): Record<string, string> {
  return { 'content-type': 'application/json', ...target.headers };
}

export function chatUrl(target: Target): URL {
  return new URL(`${target.baseUrl}/chat/completions`);
}

/** Events in one benchmark stream: role, 20 content chunks, finish, usage, [DONE]. */
export const EVENTS_PER_STREAM = 24;
