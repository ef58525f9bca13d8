import type { KeyRow } from '../keys/api-keys.ts';
import type { ReserveOutcome } from '../ledger/operations/reserve.ts';
import type { Usage } from '../protocols/internal.ts';
import { RequestBill } from '../metered/bill.ts';
import type { RunOptions } from '../metered/run.ts';
import type { ChatDeps } from '../metered/deps.ts';
import { chainFailure, routeThroughDeployments } from '../metered/deployment-call.ts';
import { settleWholeAnswer } from '../metered/settled-answer.ts';
import type { ResponseSink } from '../metered/sink.ts';
import { countTokens } from '../metered/usage-estimate.ts';
import { renderEmbeddings } from './answer.ts';
import { chargeOf } from '../protocols/charge.ts';
import { embeddingsAttempt } from './call.ts';
import { MAX_ANSWER_BYTES } from './limits.ts';
import type { OversizeAnswer } from './oversize.ts';
import { ApiError } from '../refusal.ts';
import type { EmbeddingsPlan } from './plan.ts';

/**
 * Reserves the plan's bound on the key's wallet, calls the provider, and finishes the bill exactly
 * once, as chat does (src/metered/run.ts): the reported prompt tokens at the model's price on an
 * answer, nothing on a failure. A refused outcome, with nothing sent and nothing reserved, when the
 * balance or the key's spend limit cannot cover the reservation; each caller words that refusal.
 */
export async function runEmbeddings(
  deps: ChatDeps,
  sink: ResponseSink,
  requestId: string,
  key: KeyRow,
  plan: EmbeddingsPlan,
  opts: RunOptions = {},
): Promise<ReserveOutcome> {
  const reserved = await deps.reserve({
    wallet: key.wallet,
    apiKeyId: key.id,
    requestId,
    amountUsdc: plan.reservationUsdc,
    keyHasLimit: key.spend_limit_usdc !== null,
  });
  if (!reserved.ok) return reserved;

  // As for chat: a capped key's limit admitted exactly this reservation, so a provider reporting
  // more than the inputs could use cannot take the key past its limit.
  const bill = new RequestBill(deps, key, plan, requestId, { ...opts, capAtReservation: opts.capAtReservation || reserved.keyLimited });
  try {
    // Every deployment of an embedding model is openai-compatible (checked at start-up), so each can take it.
    const routes = plan.model.deployments.map((deployment) => ({ deployment }));
    const chain = await routeThroughDeployments(
      deps,
      sink.log,
      plan.model,
      routes,
      requestId,
      (route, adapter) => embeddingsAttempt(adapter, plan, requestId, route.deployment, opts.cut),
      {
        cancelled: () => sink.destroyed,
      },
    );
    bill.markUpstreamResponse();
    if (!chain.ok) {
      await bill.void('upstream_error');
      throw chainFailure({ model: plan.model, routes }, chain);
    }
    bill.servedBy(chain.target.deployment);
    sink.header('x-tollgate-deployment', chain.target.deployment.id);
    if ('oversize' in chain.value) throw await chargeOversize(bill, plan, chain.value.oversize);
    const answer = chain.value.vectors;
    // A count of 0 beside delivered vectors is no count (every input is a token at least): estimated.
    const reported = answer.promptTokens ? answer.promptTokens : null;
    const usage = promptUsage(reported ?? (await estimatePromptTokens(plan)), reported === null);
    const outcome = await settleWholeAnswer(deps, sink, bill, usage);
    const body = await renderEmbeddings(answer, plan.encodingFormat, plan.model.upstreamName, usage.input.total, chargeOf(outcome));
    sink.send(200, body);
  } finally {
    await bill.voidIfOpen('error');
  }
  return reserved;
}

const promptUsage = (tokens: number, estimated: boolean): Usage => ({
  input: { total: tokens, cacheRead: 0, cacheWrite: 0 },
  output: { total: 0, reasoning: 0 },
  estimated,
});

/**
 * A provider that reported no usage is billed an estimate, as chat is: token arrays exactly, strings
 * by the o200k tokenizer, never above the reservation's bound.
 */
async function estimatePromptTokens(plan: EmbeddingsPlan): Promise<number> {
  let tokens = 0;
  for (const input of plan.inputs) tokens += typeof input === 'string' ? await countTokens(input) : input.length;
  return Math.min(tokens, plan.promptUpperBound);
}

/**
 * A 2xx answer too large to read whole: the provider embedded every input and billed it, so the
 * request is charged the prompt tokens the answer reported (or the estimate, when they could not
 * be read), and the client gets a 502 that says so, with the charge, and how to make an answer that
 * fits. Never free: free, the same request would make the operator pay for it again and again.
 */
async function chargeOversize(bill: RequestBill, plan: EmbeddingsPlan, oversize: OversizeAnswer): Promise<ApiError> {
  const reported = oversize.promptTokens;
  const usage = promptUsage(reported ?? (await estimatePromptTokens(plan)), reported === null);
  const outcome = await bill.settle(usage, 'answer_too_large');
  const charged = outcome.applied ? outcome.chargedUsdc : 0;
  const tokens = `${usage.input.total} prompt tokens${reported === null ? " (estimated: the answer's usage could not be read)" : ''}`;
  const what = `the provider's embeddings answer was over the ${MAX_ANSWER_BYTES} bytes the gateway reads, so it cannot be delivered`;
  const paid = `the provider embedded and billed every input, so this request was charged ${charged} micro-USDC for ${tokens}`;
  const headers = { 'x-should-retry': 'false', 'x-tollgate-charged-usdc': String(charged) };
  return new ApiError(502, 'UPSTREAM_ERROR', `${what}; ${paid}; send fewer inputs per request, or a smaller dimensions`, {}, headers);
}
