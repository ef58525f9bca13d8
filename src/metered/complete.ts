import { ApiError } from '../refusal.ts';
import { settleWholeAnswer } from './settled-answer.ts';
import type { RequestBill } from './bill.ts';
import type { ChatDeps } from './deps.ts';
import type { InboundTranslator } from '../protocols/inbound.ts';
import type { InternalCompletion, Usage } from '../protocols/internal.ts';
import type { ChatPlan } from './plan/plan.ts';
import type { AnswerKeeper, ResponseSink } from './sink.ts';
import { billedUsage, generatedText } from './usage-estimate.ts';
import { describeTransportError, redactCredentials, upstreamFailure } from './upstream-error.ts';
import { logProviderFailure } from './provider-failure-log.ts';
import { answerByteBound } from './answer-bound.ts';
import { readBoundedAnswer } from '../providers/bounded-answer.ts';
import { callDeployments, chainFailure } from './deployment-call.ts';
import { chargeOf } from '../protocols/charge.ts';

/**
 * Non-streaming: call the plan's deployments in turn until one answers (src/metered/deployment-call.ts),
 * decode its answer into the internal form, settle, answer in the client's protocol (for OpenAI in
 * and out: the provider's JSON as it was sent), naming the deployment that served.
 */
export async function completeChat(
  deps: ChatDeps,
  sink: ResponseSink,
  inbound: InboundTranslator,
  plan: ChatPlan,
  bill: RequestBill,
  keeper?: AnswerKeeper,
  cut?: AbortSignal,
): Promise<void> {
  // No abort on client disconnect: the provider bills us for the completion either way, so a call
  // under way is awaited and charged (a client gone only stops the chain from calling another
  // deployment). The adapter's first-byte and idle timeouts bound each wait, and the bill renews
  // the reservation's lease meanwhile, so a slow provider cannot outlast it. Only a cut (run.ts,
  // RunOptions) aborts it: the answer is then voided, as one that failed.
  const chain = await callDeployments(deps, sink.log, plan, bill.requestId, { signal: cut, cancelled: () => sink.destroyed });
  if (!chain.ok) {
    await bill.void('upstream_error');
    throw chainFailure(plan, chain);
  }
  const { target: route, value: res } = chain;
  bill.servedBy(route.deployment);
  bill.markUpstreamResponse();
  let answer: { text: string; parsed: InternalCompletion; usage: Usage | null };
  try {
    const bound = answerByteBound(plan);
    const read = await readBoundedAnswer(res.body, bound);
    if (!('text' in read)) throw upstreamFailure(`the provider's answer passed ${bound} bytes, more than ${plan.n} × ${plan.maxTokens} tokens can take`);
    const decoded = route.upstream.decodeAnswer(read.text);
    // A problem may quote the provider's own words (its error message): credentials cut out.
    if (!decoded.ok) throw upstreamFailure(redactCredentials(decoded.problem));
    answer = decoded;
  } catch (err) {
    // The deployment answered 2xx and then broke off or sent nonsense: it may have billed us, and
    // the same request elsewhere could be billed again, so this is the client's 502, not a fallback.
    await bill.void('upstream_error');
    const failure = err instanceof ApiError ? err : upstreamFailure(describeTransportError(err));
    logProviderFailure(sink.log, plan, route.deployment, bill.requestId, {
      status: res.statusCode,
      error: err instanceof ApiError ? undefined : err,
      detail: failure.message,
    });
    throw failure;
  }

  const usage = await billedUsage(plan, answer.usage, () => completionTextOf(answer.parsed));
  sink.header('x-tollgate-deployment', route.deployment.id);
  const outcome = await settleWholeAnswer(deps, sink, bill, usage);
  let body = inbound.encodeAnswer(answer.text, answer.parsed, plan, usage, chargeOf(outcome));
  // Kept only once paid for (the settle applied above), and before it is sent, so a client can
  // refer to it as soon as it has read it.
  if (keeper) {
    const kept = await keeper.keep(body);
    for (const [name, value] of Object.entries(kept.headers)) sink.header(name, value);
    body = kept.answer;
  }
  sink.send(200, body);
}

function completionTextOf(parsed: InternalCompletion): string {
  return parsed.choices.map((c) => generatedText(c?.message)).join('');
}
