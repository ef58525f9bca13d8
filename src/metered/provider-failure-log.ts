import { errorCode } from '../error-code.ts';
import type { Deployment } from '../providers/catalog.ts';
import type { FailureAction } from '../routing/classify.ts';
import type { ChatLog } from './sink.ts';
import type { ChatPlan } from './plan/plan.ts';

export interface ProviderFailure {
  /** The provider's HTTP status, when it answered. */
  status?: number;
  /** The transport error, when it did not answer (or the answer broke off). */
  error?: unknown;
  /** The transport error's code (or the gateway's own, PROVIDER_NOT_CONFIGURED), when already known. */
  code?: string;
  /** Which retry of this deployment failed (0: the first call). */
  retry?: number;
  /** What the attempt chain does next: retry, next, stop (absent once the answer has started). */
  action?: FailureAction;
  /** What went wrong, as told to the client (credentials already cut out). */
  detail: string;
}

/**
 * One warn line per failed provider call, so the operator sees why clients got a 502 or an error
 * event, or why a fallback served: which deployment and model, the status or transport error, and
 * the request id to match the client's report. Only an error's code or name is logged, never its
 * message or the request's headers: those can carry the provider key or a URL with one in it.
 */
export function logProviderFailure(log: ChatLog, plan: Pick<ChatPlan, 'model'>, deployment: Deployment, requestId: string, failure: ProviderFailure): void {
  const code = failure.code ?? (failure.error !== undefined ? errorCode(failure.error) : undefined);
  log.warn(
    {
      provider: deployment.provider,
      deployment: deployment.id,
      model: plan.model.id,
      requestId,
      ...(failure.status !== undefined ? { status: failure.status } : {}),
      ...(code !== undefined ? { transportError: code } : {}),
      ...(failure.retry ? { retry: failure.retry } : {}),
      // biome-ignore lint/suspicious/noThenProperty: `then` is a log field (the action taken next), never awaited
      ...(failure.action ? { then: failure.action } : {}),
    },
    `provider call failed: ${failure.detail}`,
  );
}
