import { StartupError } from '../../startup-error.ts';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import { bearerToken } from '../auth/bearer-auth.ts';
import { unauthorized } from '../../refusal.ts';
import { secretMatches } from '../auth/secret-compare.ts';

/**
 * GET /metrics in the Prometheus text format. It shows revenue per model, locked money and top-up
 * outcomes, so it is never public: it lives on its own loopback port (startMetricsServer), or on the
 * API port behind `token` (metrics.tokenEnv).
 */
export function metricsRoutes(app: FastifyInstance, services: Services, token?: string): void {
  app.get('/metrics', async (request, reply) => {
    if (token !== undefined) {
      if (!secretMatches(bearerToken(request.headers.authorization), token))
        throw unauthorized('send the metrics token: "Authorization: Bearer <the value of metrics.tokenEnv>"');
    }
    const { registry } = services.metrics;
    return reply.type(registry.contentType).send(await registry.metrics());
  });
}

/** /metrics alone on the admin port (`metrics.port`, on `metrics.host`: loopback by default). */
export async function startMetricsServer(services: Services): Promise<{ url: string; close(): Promise<void> }> {
  const { host, port } = services.config.metrics;
  const app = Fastify({ requestTimeout: 10_000 });
  metricsRoutes(app, services);
  try {
    await app.listen({ host, port });
  } catch (err) {
    await app.close();
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    throw new StartupError(
      `the metrics port ${host}:${port} is in use (another instance?); give each instance its own metrics.port (or TOLLGATE_METRICS_PORT), or set metrics.enabled: false`,
    );
  }
  const addr = app.server.address();
  const bound = typeof addr === 'object' && addr ? addr.port : port;
  return { url: `http://${host}:${bound}`, close: () => app.close() };
}
