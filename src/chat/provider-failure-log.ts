import { errorCode } from '../error-code.ts';
import type { ChatLog } from './sink.ts';
import type { ChatPlan } from './plan.ts';

export interface ProviderFailure {
  /** The provider's HTTP status, when it answered. */
  status?: number;
  /** The transport error, when it did not answer (or the answer broke off). */
  error?: unknown;
  /** What went wrong, as told to the client (credentials already cut out). */
  detail: string;
}

/**
 * One warn line per failed provider call, so the operator sees why clients got a 502 or an error
 * event: which provider and model, the status or transport error, and the request id to match the
 * client's report. Only an error's code or name is logged, never its message or the request's
 * headers: those can carry the provider key or a URL with one in it.
 */
export function logProviderFailure(log: ChatLog, plan: Pick<ChatPlan, 'model'>, requestId: string, failure: ProviderFailure): void {
  log.warn(
    {
      provider: plan.model.provider,
      model: plan.model.id,
      requestId,
      ...(failure.status !== undefined ? { status: failure.status } : {}),
      ...(failure.error !== undefined ? { transportError: errorCode(failure.error) } : {}),
    },
    `provider call failed: ${failure.detail}`,
  );
}

