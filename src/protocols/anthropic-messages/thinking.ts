import { refuse, type Translated } from '../translated.ts';

/** The thinking types the gateway knows the price and budget rules of, and the keys it forwards. */
export const THINKING_TYPES: ReadonlySet<string> = new Set(['enabled', 'adaptive', 'disabled']);
export const THINKING_KEYS: ReadonlySet<string> = new Set(['type', 'budget_tokens', 'display']);

/** Anthropic refuses a thinking budget under 1,024 tokens. */
export const MIN_THINKING_BUDGET = 1024;

/**
 * Thinking budgets for OpenAI's `reasoning_effort`, the same steps the chat plan uses to turn an
 * effort into `thinking` (src/metered/plan/plan.ts), raised to Anthropic's minimum. The budget is part of
 * `max_tokens` (Anthropic bills thinking as output), so it is cut to stay below it. `none` (OpenAI's
 * no reasoning) is no thinking; `xhigh`, above high, takes the largest budget here.
 */
export const EFFORT_BUDGETS: Readonly<Record<string, number>> = {
  minimal: MIN_THINKING_BUDGET,
  low: MIN_THINKING_BUDGET,
  medium: 4096,
  high: 16384,
  xhigh: 16384,
};

/** Anthropic's `thinking` for the request: `thinking` as sent wins; otherwise one made from `reasoning_effort`. */
export function thinkingFor(thinking: unknown, effort: unknown, maxTokens: number): Translated<unknown> {
  if (thinking !== undefined && thinking !== null) {
    const t = thinking as { type?: unknown; budget_tokens?: unknown };
    if (typeof thinking !== 'object' || Array.isArray(thinking) || typeof t.type !== 'string') {
      return refuse('thinking', 'thinking must be {type: "enabled", budget_tokens} or {type: "disabled"}');
    }
    // The same types and keys the Messages field policy allows (checkFieldValues), for a chat-completions
    // request whose thinking goes to Anthropic: anything else would be forwarded unchecked.
    const unknown = Object.keys(thinking).find((k) => !THINKING_KEYS.has(k));
    if (unknown !== undefined)
      return refuse(`thinking.${unknown.slice(0, 100)}`, `thinking.${unknown.slice(0, 100)} is not accepted; thinking takes ${[...THINKING_KEYS].join(', ')}`);
    if (!THINKING_TYPES.has(t.type))
      return refuse('thinking.type', `thinking.type ${JSON.stringify(t.type.slice(0, 40))} is refused: send one of ${[...THINKING_TYPES].join(', ')}`);
    if (t.type === 'enabled') {
      const budget = t.budget_tokens;
      if (typeof budget !== 'number' || !Number.isInteger(budget) || budget < MIN_THINKING_BUDGET || budget >= maxTokens) {
        return refuse(
          'thinking.budget_tokens',
          `thinking.budget_tokens must be a whole number from ${MIN_THINKING_BUDGET} to below max_tokens (${maxTokens}); raise max_tokens or lower the budget`,
        );
      }
    }
    return { ok: true, value: thinking };
  }
  if (effort === undefined || effort === null || effort === 'none') return { ok: true, value: undefined };
  const wanted = typeof effort === 'string' && Object.hasOwn(EFFORT_BUDGETS, effort) ? EFFORT_BUDGETS[effort]! : undefined;
  if (wanted === undefined) return refuse('reasoning_effort', `reasoning_effort must be one of none, ${Object.keys(EFFORT_BUDGETS).join(', ')}`);
  const budget = Math.min(wanted, maxTokens - 1);
  if (budget < MIN_THINKING_BUDGET) {
    return refuse(
      'reasoning_effort',
      `reasoning_effort needs max_tokens above ${MIN_THINKING_BUDGET} on Anthropic models: thinking takes at least ${MIN_THINKING_BUDGET} tokens of max_tokens; raise max_tokens`,
    );
  }
  return { ok: true, value: { type: 'enabled', budget_tokens: budget } };
}
