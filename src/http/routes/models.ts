import { clientBucket } from '../client-bucket.ts';
import type { FastifyInstance } from 'fastify';
import { modelEntry } from '../../providers/catalog.ts';
import type { Services } from '../../services.ts';
import { enforceRateLimit } from '../rate-limit.ts';

export function modelRoutes(app: FastifyInstance, services: Services): void {
  // The catalog only changes with the configuration, so the body is built once.
  const body = { object: 'list', data: services.catalog.models.map((m) => modelEntry(services.catalog, m)) };
  app.get('/v1/models', async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    return body;
  });
}
