import type { FastifyInstance } from 'fastify';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../../outage.ts';
import type { Services } from '../../services.ts';

/**
 * 200 `{status: "ok", checks}` while every required dependency answers; 503 `{status: "degraded",
 * checks}` otherwise, so a load balancer drains the instance and sends traffic back by itself once
 * the dependency returns. `checks` names each dependency ("database", "redis", "rpc:<chain id>");
 * `cooldowns`, when any, the model deployments this instance is skipping for now (src/routing/).
 */
export function healthRoutes(app: FastifyInstance, services: Services): void {
  app.get('/health', async (_request, reply) => {
    const report = await services.health.report();
    // Deployments cooling down are listed, never a reason to fail the instance: another instance,
    // or this one's other deployments, serve meanwhile, and the cooldown ends by itself.
    const cooling = services.chat.routing.cooldown.cooling();
    const cooldowns = cooling.length ? { cooldowns: cooling.map((c) => ({ deployment: c.deployment, retryInSeconds: Math.ceil(c.remainingMs / 1000) })) } : {};
    if (report.healthy) return { status: 'ok', checks: report.checks, ...cooldowns };
    return reply
      .code(503)
      .header('retry-after', String(OUTAGE_RETRY_AFTER_SECONDS))
      .send({ status: 'degraded', checks: report.checks, ...cooldowns, message: `not answering: ${report.down.join(', ')}` });
  });
}
