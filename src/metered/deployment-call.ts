import type { Dispatcher } from 'undici';
import type { ApiError } from '../refusal.ts';
import { runAttempts, type AttemptFailure, type AttemptOutcome, type ChainObserver, type ChainOutcome } from '../routing/attempts.ts';
import { statusFailure, transportFailure } from '../routing/classify.ts';
import type { ChatDeps } from './deps.ts';
import type { DeploymentPlan } from './plan/deployment.ts';
import type { CatalogModel, Deployment } from '../providers/catalog.ts';
import type { ProviderAdapter } from '../providers/adapter.ts';
import type { ChatPlan } from './plan/plan.ts';
import { logProviderFailure } from './provider-failure-log.ts';
import type { ChatLog } from './sink.ts';
import { describeTransportError, upstreamFailure, wholeAnswerTimeoutFailure } from './upstream-error.ts';

/** One deployment as the attempt chain sees it: its id and weight, beside what the caller planned for it. */
export type Routed<R> = R & { id: string; weight?: number };
export type ChainResult<R, T> = ChainOutcome<Routed<R>, T, ApiError>;
export type ChatChainOutcome = ChainResult<DeploymentPlan, Dispatcher.ResponseData>;

/** One call to one deployment's provider, its failure classified for the chain. */
export type DeploymentAttempt<R, T> = (route: R, adapter: ProviderAdapter) => Promise<AttemptOutcome<T, ApiError>>;

/**
 * Calls the plan's deployments through the attempt chain (src/routing/attempts.ts) until one
 * answers with a 2xx: each failed call is one warn line and a metric, and the chain's outcome says
 * which deployment answered (its response's body not yet read) or the last failure's 502.
 * `signal` aborts the call in progress; `cancelled` (the client left) ends the chain.
 */
export async function callDeployments(
  deps: ChatDeps,
  log: ChatLog,
  plan: ChatPlan,
  requestId: string,
  opts: { signal?: AbortSignal; cancelled?: () => boolean } = {},
): Promise<ChatChainOutcome> {
  for (const s of plan.skipped)
    log.warn({ requestId, model: plan.model.id, deployment: s.deployment.id }, `skipped a deployment that cannot take this request: ${s.reason}`);
  return routeThroughDeployments(
    deps,
    log,
    plan.model,
    plan.routes,
    requestId,
    (route, adapter) => callChat(adapter, plan, route, requestId, opts.signal),
    opts,
  );
}

/**
 * The attempt chain over any request's deployments (chat's and embeddings'): the per-deployment
 * metrics, the warn line per failed attempt, the cooldowns, and a deployment whose provider has no
 * key passed over (it would only earn a 401 the operator cannot see). `call` makes one call.
 */
export async function routeThroughDeployments<R extends { deployment: Deployment }, T>(
  deps: ChatDeps,
  log: ChatLog,
  model: CatalogModel,
  routes: readonly R[],
  requestId: string,
  call: DeploymentAttempt<R, T>,
  opts: { cancelled?: () => boolean } = {},
): Promise<ChainResult<R, T>> {
  const settings = deps.routing.settings();
  const routed: Routed<R>[] = routes.map((r) => ({ ...r, id: r.deployment.id, ...(r.deployment.weight ? { weight: r.deployment.weight } : {}) }));
  const attempt = async (route: Routed<R>): Promise<AttemptOutcome<T, ApiError>> => {
    const { provider } = route.deployment;
    const adapter = deps.providers.get(provider);
    if (!adapter || deps.routing.missingKey(provider)) {
      return { ok: false, action: 'next', code: 'PROVIDER_NOT_CONFIGURED', error: upstreamFailure(`the provider ${provider} has no API key configured`) };
    }
    return call(route, adapter);
  };
  return runAttempts(routed, attempt, {
    ...settings,
    deadline: performance.now() + settings.deadlineMs,
    cooldown: deps.routing.cooldown,
    cancelled: opts.cancelled,
    observer: new AttemptReport<R>(deps.metrics, log, model, requestId),
  });
}

/**
 * What the chain reports for one request: a metric per attempt, failure, fallback and cooldown, and
 * a warn line per failed attempt. A class, so a request builds one object, not one closure per event.
 */
class AttemptReport<R extends { deployment: Deployment }> implements ChainObserver<Routed<R>> {
  constructor(
    private readonly m: ChatDeps['metrics'],
    private readonly log: ChatLog,
    private readonly model: CatalogModel,
    private readonly requestId: string,
  ) {}

  attempt(route: Routed<R>): void {
    this.m.deploymentAttempts.inc({ deployment: route.id });
  }

  failed(route: Routed<R>, failure: AttemptFailure<unknown>, retry: number): void {
    this.m.deploymentFailures.inc({ deployment: route.id, reason: String(failure.status ?? failure.code ?? 'error') });
    logProviderFailure(this.log, { model: this.model }, route.deployment, this.requestId, {
      status: failure.status,
      code: failure.code,
      retry,
      action: failure.action,
      detail: (failure.error as ApiError).message,
    });
  }

  fellBack(from: Routed<R>, to: Routed<R>): void {
    this.m.deploymentFallbacks.inc({ from: from.id, to: to.id });
  }

  cooledDown(route: Routed<R>): void {
    this.m.deploymentCooldowns.inc({ deployment: route.id });
    this.log.warn(
      { deployment: route.id, requestId: this.requestId },
      `deployment ${route.id} failed repeatedly; tried after the others for chat.cooldown.seconds`,
    );
  }
}

/** What a client whose non-streamed answer timed out can do (every protocol spells streaming `stream: true`). */
const LONG_ANSWER_ADVICE = 'an answer that is not streamed starts only once fully generated: for a long one, set stream: true or ask for fewer output tokens';

/** One chat call to one deployment, its failure classified for the chain. */
async function callChat(
  adapter: ProviderAdapter,
  plan: ChatPlan,
  route: DeploymentPlan,
  requestId: string,
  signal?: AbortSignal,
): Promise<AttemptOutcome<Dispatcher.ResponseData, ApiError>> {
  let res: Dispatcher.ResponseData;
  try {
    res = await adapter.chat(route.upstreamBytes, requestId, signal, plan.upstreamHeaders);
  } catch (err) {
    const error = (!plan.stream && wholeAnswerTimeoutFailure(err, LONG_ANSWER_ADVICE)) || upstreamFailure(describeTransportError(err));
    return transportFailure(err, plan.stream ? 'streamed' : 'whole', error);
  }
  if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true, value: res };
  const text = await res.body.text().catch(() => '');
  const error = upstreamFailure(`the provider answered ${res.statusCode}`, text, { status: res.statusCode, headers: res.headers });
  return statusFailure(res.statusCode, res.headers, error, text);
}

/**
 * The client's error when no deployment served: the last failure's, saying how many deployments
 * were really called (a deadline can end the chain before the last) and in how many attempts.
 */
export function chainFailure(
  plan: { model: CatalogModel; routes: readonly unknown[] },
  outcome: Extract<ChainResult<unknown, unknown>, { ok: false }>,
): ApiError {
  if (!outcome.last) return upstreamFailure('the client left before any provider was called');
  const last = outcome.last.error;
  const total = plan.routes.length;
  if (total > 1 && outcome.ended !== 'stopped') {
    const which = outcome.deploymentsTried >= total ? 'every deployment' : `${outcome.deploymentsTried} of ${total} deployments`;
    last.message = `${which} of ${plan.model.id} failed (${outcome.attempts} attempt${outcome.attempts === 1 ? '' : 's'}); the last: ${last.message}`;
  }
  return last;
}
