import { ApiError } from '../refusal.ts';
import type { ProviderAdapter } from '../providers/adapter.ts';
import type { RequestBill } from './bill.ts';
import type { ChatDeps } from './deps.ts';
import type { InboundTranslator } from '../protocols/inbound.ts';
import type { InternalCompletion, Usage } from '../protocols/internal.ts';
import type { ChatPlan } from './plan.ts';
import type { AnswerKeeper, ResponseSink } from './sink.ts';
import { estimateUsage, generatedText } from './usage.ts';
import { describeTransportError, upstreamFailure } from './upstream-error.ts';
import { logProviderFailure } from './provider-failure-log.ts';
import { chargeOf } from '../protocols/charge.ts';

/**
 * Non-streaming: call the provider, decode its answer into the internal form, settle, answer in
 * the client's protocol (for OpenAI in and out: the provider's JSON as it was sent).
 */
export async function completeChat(deps: ChatDeps, sink: ResponseSink, inbound: InboundTranslator, plan: ChatPlan, adapter: ProviderAdapter, bill: RequestBill, keeper?: AnswerKeeper): Promise<void> {
  let answer: { text: string; parsed: InternalCompletion; usage: Usage | null };
  let status: number | undefined;
  try {
    // No abort on client disconnect: the provider bills us for the completion either way, so it is
    // awaited and charged. The adapter's first-byte and idle timeouts bound the wait, and the bill
    // renews the reservation's lease meanwhile, so a slow provider cannot outlast it.
    const res = await adapter.chat(plan.upstreamJson, bill.requestId, undefined, plan.upstreamHeaders);
    bill.markUpstreamResponse();
    status = res.statusCode;
    const text = await res.body.text();
    if (res.statusCode < 200 || res.statusCode >= 300) throw upstreamFailure(`the provider answered ${res.statusCode}`, text, { status: res.statusCode, headers: res.headers });
    const decoded = plan.upstream.decodeAnswer(text);
    if (!decoded.ok) throw upstreamFailure(decoded.problem);
    answer = decoded;
  } catch (err) {
    await bill.void('upstream_error');
    const failure = err instanceof ApiError ? err : upstreamFailure(describeTransportError(err));
    logProviderFailure(sink.log, plan, bill.requestId, { status, error: err instanceof ApiError ? undefined : err, detail: failure.message });
    throw failure;
  }

  const usage = answer.usage ?? (await estimateUsage(plan, completionTextOf(answer.parsed)));
  const outcome = await bill.settle(usage);
  // The reservation was finished by someone else meanwhile (the sweeper after a lost lease, or a
  // shutdown that ran out of grace): nothing could be charged, so the answer is not handed out free.
  if (!outcome.applied) {
    throw new ApiError(503, 'SERVICE_UNAVAILABLE', `this request's reservation was released before the provider answered, so nothing was charged and the answer is withheld; retry, and quote request id ${bill.requestId} if it repeats`);
  }
  sink.header('content-type', 'application/json; charset=utf-8');
  sink.header('x-tollgate-charged-usdc', outcome.chargedUsdc);
  if (outcome.deferred) {
    // The database did not answer, but the bill is on local disk and applied when it does: the
    // answer exists and is paid for, so it is handed out; the balance is not known right now.
    sink.header('x-tollgate-billing', 'deferred');
  } else {
    // The settle reports the balance it left; read it only if it did not.
    sink.header('x-tollgate-balance-usdc', outcome.balanceUsdc ?? (await deps.balance(bill.key.wallet)));
  }
  sink.header('x-tollgate-usage-estimated', usage.estimated ? 'true' : 'false');
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
