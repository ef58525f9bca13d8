import type { FastifyRequest } from 'fastify';
import type { BilledPlan } from '../chat/bill.ts';
import { missingKeyVariable } from '../providers/provider-keys.ts';
import type { Services } from '../services.ts';
import { ApiError } from '../refusal.ts';

/**
 * Before anything is reserved or paid: a provider without its key cannot serve, and the client is not
 * told which variable is missing (that is the operator's business, so it goes to the log).
 */
export function refuseUnconfiguredProvider(services: Services, request: FastifyRequest, plan: Pick<BilledPlan, 'model'>): void {
  const missingKey = missingKeyVariable(services.config, plan.model.provider);
  if (!missingKey) return;
  request.log.warn({ provider: plan.model.provider, model: plan.model.id, variable: missingKey }, `refused a request: provider ${plan.model.provider} has no API key; set ${missingKey} and restart`);
  throw new ApiError(503, 'PROVIDER_NOT_CONFIGURED', `model ${plan.model.id} is not available on this gateway right now; nothing was charged. Use another model from GET /v1/models, or ask the operator (quote request id ${request.id})`);
}
