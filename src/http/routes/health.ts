import type { FastifyInstance } from 'fastify';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../../outage.ts';
import type { Services } from '../../services.ts';

/**
 * 200 `{status: "ok", checks}` while every required dependency answers; 503 `{status: "degraded",
 * checks}` otherwise, so a load balancer drains the instance and sends traffic back by itself once
 * the dependency returns. `checks` names each dependency ("database", "redis", "rpc:<chain id>").
 */
export function healthRoutes(app: FastifyInstance, services: Services): void {
  app.get('/health', async (_request, reply) => {
    const report = await services.health.report();
    if (report.healthy) return { status: 'ok', checks: report.checks };
    return reply
      .code(503)
      .header('retry-after', String(OUTAGE_RETRY_AFTER_SECONDS))
      .send({ status: 'degraded', checks: report.checks, message: `not answering: ${report.down.join(', ')}` });
  });
}
