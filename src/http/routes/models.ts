import { clientBucket } from '../client-bucket.ts';
import type { FastifyInstance, FastifyRequest, FastifyReply } from 'fastify';
import { findModel, modelEntry } from '../../providers/catalog.ts';
import type { Services } from '../../services.ts';
import { ApiError, notFound } from '../../refusal.ts';
import { OPENAI_COMPATIBLE } from '../error-format.ts';
import { enforceRateLimit } from '../rate-limit.ts';

export function modelRoutes(app: FastifyInstance, services: Services): void {
  // The catalog only changes with the configuration, so the bodies are built once.
  const entries = new Map(services.catalog.models.map((m) => [m.id, modelEntry(services.catalog, m)]));
  const body = { object: 'list', data: [...entries.values()] };
  const limit = (request: FastifyRequest, reply: FastifyReply) =>
    enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);

  app.get('/v1/models', OPENAI_COMPATIBLE, async (request, reply) => {
    await limit(request, reply);
    return body;
  });

  // The openai SDKs' models.retrieve. Ids contain a slash (openai/gpt-4o-mini), so the rest of the
  // path is the id; a bare name works when one provider alone offers it, as in chat requests.
  app.get<{ Params: { '*': string } }>('/v1/models/*', OPENAI_COMPATIBLE, async (request, reply) => {
    await limit(request, reply);
    const id = request.params['*'];
    const lookup = findModel(services.catalog, id);
    if ('found' in lookup) return entries.get(lookup.found.id);
    if ('ambiguous' in lookup) {
      throw new ApiError(404, 'NOT_FOUND', `model "${id}" is offered by several providers; ask for one of ${lookup.ambiguous.join(', ')}`, {
        candidates: lookup.ambiguous,
      });
    }
    throw notFound(`unknown model "${id.slice(0, 200)}"; GET /v1/models lists the available ones`);
  });
}
