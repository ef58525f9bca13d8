import { reservationFor } from '../providers/pricing.ts';
import { fitMaxTokens } from './fit.ts';
import type { ChatPlan } from './plan/plan.ts';

/** What a refused chat request would need, said in its 402: the figures and the sentence that names them. */
export interface Shortfall {
  text: string;
  fields: { prompt_tokens_bound: number; max_tokens: number; max_tokens_affordable: number; min_required_usdc: number };
}

/**
 * The figures a client needs to act on a reservation `available` cannot cover: the prompt bound
 * and max_tokens it was reserved at, the largest max_tokens `available` covers with this prompt
 * (0 when not even one output token fits), and the least any max_tokens needs (max_tokens 1).
 */
export function shortfallOf(plan: Pick<ChatPlan, 'model' | 'promptUpperBound' | 'maxTokens' | 'n' | 'reservationUsdc'>, available: number): Shortfall {
  const affordable = fitMaxTokens(plan, available);
  const least = reservationFor(plan.model, plan.promptUpperBound, 1, plan.n);
  const covers =
    affordable > 0
      ? `the ${available} available covers max_tokens up to ${affordable}`
      : `its prompt alone needs ${least} (at max_tokens 1), more than the ${available} available`;
  return {
    text: `. It reserves ${plan.reservationUsdc} for up to ${plan.promptUpperBound} prompt tokens and max_tokens ${plan.maxTokens}: ${covers}`,
    fields: { prompt_tokens_bound: plan.promptUpperBound, max_tokens: plan.maxTokens, max_tokens_affordable: affordable, min_required_usdc: least },
  };
}
