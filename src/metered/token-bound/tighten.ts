import { reservationFor } from '../../providers/pricing.ts';
import { largestBound, type DeploymentPlan } from '../plan/deployment.ts';
import type { ChatPlan } from '../plan/plan.ts';
import { templateTokens } from '../prompt-bound.ts';
import { boundedTokenCount } from './count-bounded.ts';

/**
 * Tokens counted even past what the wallet affords, so that the 402 of a typical agent's request
 * (Claude Code's first is about 12,000) names the tokenizer's figures, not the byte bound's four
 * times larger ones. Beyond it, a wallet that cannot pay costs no more CPU: a count this long takes
 * about as long as parsing a large body (tens of milliseconds).
 */
export const COUNTED_FOR_FIGURES = 16_384;

/**
 * The plan with each deployment's prompt bound lowered to its tokenizer's bound where the operator
 * named the tokenizer that deployment bills with (models[].tokenizer), and the reservation computed
 * again from the largest; the plan itself when nothing is lower. The bytes sent do not change.
 *
 * It runs only for a request the byte bound could not reserve (src/http/inference/balance-fit.ts): counting
 * costs CPU (about 2 ms per KiB), which a request the wallet covers anyway need not spend. It stops
 * once a count passes both `affordableTokens` (the most the wallet could reserve: past that the
 * request is a 402 whatever the count) and COUNTED_FOR_FIGURES.
 */
export async function tightenPromptBound(plan: ChatPlan, affordableTokens = Infinity): Promise<ChatPlan> {
  const stopAbove = Math.max(affordableTokens, COUNTED_FOR_FIGURES);
  const routes: DeploymentPlan[] = [];
  for (const route of plan.routes) routes.push({ ...route, promptUpperBound: Math.min(route.promptUpperBound, await tokenizerBound(route, plan, stopAbove)) });
  const promptUpperBound = largestBound(routes);
  if (promptUpperBound >= plan.promptUpperBound) return plan;
  return { ...plan, routes, promptUpperBound, reservationUsdc: reservationFor(plan.model, promptUpperBound, plan.maxTokens, plan.n) };
}

/**
 * An upper bound on the prompt tokens `route`'s provider can bill, from its tokenizer's count of the
 * very JSON it is sent, or Infinity when there is none (no tokenizer named, an Anthropic provider,
 * a body too long to count, a count past `stopAbove`). Why the count of the JSON bounds the prompt
 * the provider renders from it (the strings' text, unescaped, in its chat template), and with what
 * margin: docs/DECISIONS.md, "The prompt bound by tokenizer".
 */
async function tokenizerBound(route: DeploymentPlan, plan: ChatPlan, stopAbove: number): Promise<number> {
  const family = route.deployment.tokenizer;
  if (!family || route.deployment.upstream !== 'openai-compatible') return Infinity;
  // Text again only here, for a request the byte bound could not reserve; the plan keeps the bytes.
  const upstreamJson = route.upstreamBytes.toString();
  const tokens = await boundedTokenCount(upstreamJson, family, stopAbove);
  if (tokens === null) return Infinity;
  return tokens + escapeMargin(upstreamJson) + templateTokens(plan.upstreamBody) + plan.parts.tokens;
}

/**
 * One token per escape sequence in the JSON (`\\n`, `\\"`, `\\u0000`…): the provider tokenizes the
 * character each stands for, which can join the text around it into other pieces than the JSON's.
 */
function escapeMargin(json: string): number {
  let escapes = 0;
  for (let i = json.indexOf('\\'); i !== -1; i = json.indexOf('\\', i + 2)) escapes++;
  return escapes;
}
