import Fastify, { type FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';

/** GET /metrics in the Prometheus text format. */
export function metricsRoutes(app: FastifyInstance, services: Services): void {
  app.get('/metrics', async (_request, reply) => {
    const { registry } = services.metrics;
    return reply.type(registry.contentType).send(await registry.metrics());
  });
}

/** /metrics alone on the admin port (`metrics.port`), so it can stay on a private network. */
export async function startMetricsServer(services: Services): Promise<{ url: string; close(): Promise<void> }> {
  const app = Fastify();
  metricsRoutes(app, services);
  await app.listen({ host: services.config.metrics.host, port: services.config.metrics.port });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : services.config.metrics.port;
  return { url: `http://${services.config.metrics.host}:${port}`, close: () => app.close() };
}
