import { reservationFor } from '../providers/pricing.ts';
import type { ChatPlan } from './plan/plan.ts';

/**
 * The largest max_tokens whose reservation, with the plan's own prompt bound, is at most
 * `availableUsdc`; 0 when not even one output token fits. The reservation grows with max_tokens,
 * so a binary search finds it. The caller plans the request again at this value (the body then
 * carries it, and its prompt bound can only shrink) and reserves that plan's own amount: what is
 * reserved is always computed from the body as sent, never from this estimate.
 */
export function fitMaxTokens(plan: Pick<ChatPlan, 'model' | 'promptUpperBound' | 'maxTokens' | 'n'>, availableUsdc: number): number {
  let lo = 0;
  let hi = plan.maxTokens;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (reservationFor(plan.model, plan.promptUpperBound, mid, plan.n) <= availableUsdc) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * The most prompt tokens whose reservation, beside `maxTokens` output tokens, is at most
 * `availableUsdc`; -1 when not even an empty prompt fits. Counting a prompt past this is wasted work:
 * the request cannot be reserved whatever the count.
 */
export function affordablePromptTokens(plan: Pick<ChatPlan, 'model' | 'promptUpperBound' | 'n'>, maxTokens: number, availableUsdc: number): number {
  let lo = -1;
  let hi = plan.promptUpperBound;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (reservationFor(plan.model, mid, maxTokens, plan.n) <= availableUsdc) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
