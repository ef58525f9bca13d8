import type { FastifyRequest } from 'fastify';
import type { CatalogModel, Deployment } from '../../providers/catalog.ts';
import { missingKeyVariable } from '../../providers/provider-keys.ts';
import type { Services } from '../../services.ts';
import { ApiError } from '../../refusal.ts';

/**
 * Before anything is reserved or paid: a provider without its key cannot serve, so a model none of
 * whose deployments has its key is refused here (one that has a fallback with a key is not: the
 * attempt chain moves past the keyless ones). The client is not told which variable is missing
 * (that is the operator's business, so it goes to the log). It is a configuration error: the same
 * request answers the same until the operator sets the key and restarts, so it says
 * `x-should-retry: false` and names no Retry-After (an SDK would otherwise retry it, and Claude
 * Code ten times over minutes).
 */
export function refuseUnconfiguredProvider(
  services: Services,
  request: FastifyRequest,
  plan: { model: CatalogModel; routes?: readonly { deployment: Deployment }[] },
): void {
  const deployments = plan.routes?.map((r) => r.deployment) ?? plan.model.deployments;
  const missing = deployments.map((d) => ({ provider: d.provider, variable: missingKeyVariable(services.config, d.provider) }));
  if (missing.some((m) => !m.variable)) return;
  const { provider, variable: missingKey } = missing[0]!;
  request.log.warn(
    { provider, model: plan.model.id, variable: missingKey },
    `refused a request: provider ${provider} has no API key; set ${missingKey} and restart`,
  );
  throw new ApiError(
    503,
    'PROVIDER_NOT_CONFIGURED',
    `model ${plan.model.id} is not available on this gateway right now; nothing was charged. Use another model from GET /v1/models, or ask the operator (quote request id ${request.id})`,
    {},
    {
      'x-should-retry': 'false',
    },
  );
}
