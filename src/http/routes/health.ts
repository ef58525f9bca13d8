import { sql } from 'kysely';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';

export function healthRoutes(app: FastifyInstance, services: Services): void {
  app.get('/health', async (request, reply) => {
    try {
      await sql`select 1`.execute(services.storage.db);
      return { status: 'ok' };
    } catch (err) {
      request.log.warn({ err }, 'health check: database did not answer');
      return reply.code(503).send({ status: 'degraded', database: 'unreachable' });
    }
  });
}
