import type { FastifyInstance } from 'fastify';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../../outage.ts';
import type { Services } from '../../services.ts';

/**
 * 200 `{status: "ok", checks}` while every required dependency answers; 503 `{status: "degraded",
 * checks}` otherwise, so a load balancer drains the instance and sends traffic back by itself once
 * the dependency returns. `checks` names each dependency ("database", "redis", "rpc:<chain id>");
 * `cooldowns`, when any, the model deployments this instance is skipping for now (src/routing/).
 * While Redis is down and rate limits are enforced per instance (rateLimits.redisOutage: local),
 * the answer is 200 with `status: "degraded"` and `rateLimits: "local"`: the instance serves, so a
 * load balancer (which reads the status code) keeps sending it traffic, and a person sees why.
 */
export function healthRoutes(app: FastifyInstance, services: Services): void {
  app.get('/health', async (_request, reply) => {
    const report = await services.health.report();
    // Deployments cooling down are listed, never a reason to fail the instance: another instance,
    // or this one's other deployments, serve meanwhile, and the cooldown ends by itself.
    const cooling = services.chat.routing.cooldown.cooling();
    const cooldowns = cooling.length ? { cooldowns: cooling.map((c) => ({ deployment: c.deployment, retryInSeconds: Math.ceil(c.remainingMs / 1000) })) } : {};
    if (report.healthy && services.rateLimitsDegraded()) {
      const share = `1/${services.config.rateLimits.instances}`;
      const message = `redis is not answering: each instance enforces its share (${share}) of the rate limits until it answers`;
      return { status: 'degraded', checks: report.checks, rateLimits: 'local', ...cooldowns, message };
    }
    if (report.healthy) return { status: 'ok', checks: report.checks, ...cooldowns };
    return reply
      .code(503)
      .header('retry-after', String(OUTAGE_RETRY_AFTER_SECONDS))
      .send({ status: 'degraded', checks: report.checks, ...cooldowns, message: `not answering: ${report.down.join(', ')}` });
  });
}
