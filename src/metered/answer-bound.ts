import type { ChatPlan } from './plan/plan.ts';

/** Room for everything of a whole answer that is not its tokens: ids, the message's frame, usage. */
const FRAME_BYTES = 1024 * 1024;
/**
 * Bytes one generated token may take in a JSON answer: its text escaped (a token of three CJK
 * characters written as `\uXXXX` escapes is 18 bytes), a tool call's arguments escaped once more.
 */
const TOKEN_BYTES = 64;
/** Bytes one logprobs entry may take (`{"token", "logprob", "bytes": [...]}`), per token and per alternative. */
const LOGPROB_BYTES = 256;

/**
 * The most bytes a whole (non-streamed) answer to `plan` can take: n choices of at most max_tokens
 * tokens each, with their logprobs when asked for. A provider that sends more is not answering this
 * request (a body that never ends would otherwise be held until the memory runs out).
 */
export function answerByteBound(plan: Pick<ChatPlan, 'n' | 'maxTokens' | 'upstreamBody'>): number {
  const { logprobs, top_logprobs: top } = plan.upstreamBody;
  const alternatives = typeof top === 'number' && top > 0 ? top : 0;
  const perToken = TOKEN_BYTES + (logprobs === true || alternatives > 0 ? LOGPROB_BYTES * (1 + alternatives) : 0);
  return FRAME_BYTES + plan.n * plan.maxTokens * perToken;
}
