import type { TargetAddress } from '../targets.ts';

/** The chat body every target gets; `stream` asks for the usage chunk too, as Tollgate always does. */
/** With `promptBytes`, a conversation of about that size before the question, as an agent's prompt is. */
export function chatBody(model: string, stream: boolean, promptBytes = 0): string {
  const earlier = promptBytes > 0 ? [{ role: 'system', content: 'Context line. '.repeat(Math.ceil(promptBytes / 14)).slice(0, promptBytes) }] : [];
  return JSON.stringify({
    model,
    messages: [...earlier, { role: 'user', content: 'Say twenty words.' }],
    max_tokens: 64,
    ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
  });
}

/** Every wallet's headers for a chat request, in the target's order. */
export function chatHeaderSets(target: TargetAddress): Array<Record<string, string>> {
  return target.headerSets.map((headers) => ({ 'content-type': 'application/json', ...headers }));
}

/** Every instance's chat URL, in the target's order. */
export function chatUrls(target: TargetAddress): URL[] {
  return target.baseUrls.map((base) => new URL(`${base}/chat/completions`));
}

/**
 * Which instance and which wallet the i-th request of a run goes to: wallets in turn, and
 * instances in turn shifted by one every full round of wallets, so that each wallet's requests
 * alternate between the instances (as behind a load balancer) rather than always landing on the
 * same one (which with an even number of wallets plain `i % instances` would do).
 */
export function nthRequest(i: number, instances: number, wallets: number): { instance: number; wallet: number } {
  return { instance: (i + Math.floor(i / wallets)) % instances, wallet: i % wallets };
}

/** Events in one benchmark stream: role, 20 content chunks, finish, usage, [DONE]. */
export const EVENTS_PER_STREAM = 24;
