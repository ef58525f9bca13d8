import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { ApiError, handleError } from './http/errors.ts';
import { chatRoutes } from './http/routes/chat.ts';
import { healthRoutes } from './http/routes/health.ts';
import { keyRoutes } from './http/routes/keys.ts';
import { modelRoutes } from './http/routes/models.ts';
import { usageRoutes } from './http/routes/usage.ts';
import type { Services } from './services.ts';

export interface RegisteredRoute {
  method: string;
  url: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route the app serves, for 405 answers and the OpenAPI completeness test. */
    registeredRoutes: RegisteredRoute[];
  }
}

export async function buildApp(services: Services): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: services.logger as FastifyBaseLogger,
    bodyLimit: services.config.limits.bodyBytes,
    trustProxy: services.config.server.trustProxy,
    genReqId: () => randomUUID(),
  });

  const routes: RegisteredRoute[] = [];
  app.decorate('registeredRoutes', routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) if (method !== 'HEAD') routes.push({ method, url: route.url });
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  // JSON only: any other body type is refused with 415 instead of being half-understood.
  app.removeContentTypeParser('text/plain');

  app.setErrorHandler(handleError);
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = routes.filter((r) => routeMatches(r.url, path)).map((r) => r.method);
    if (allowed.length) {
      throw new ApiError(405, 'METHOD_NOT_ALLOWED', `${request.method} is not supported on ${path}; use ${allowed.join(' or ')}`, {}, { allow: allowed.join(', ') });
    }
    void reply.code(404).send({ error: 'NOT_FOUND', message: `no route ${request.method} ${path}; see GET /v1/models, POST /v1/auth/keys, GET /v1/usage/:wallet` });
  });

  healthRoutes(app, services);
  modelRoutes(app, services);
  keyRoutes(app, services);
  usageRoutes(app, services);
  chatRoutes(app, services);
  await app.ready();
  return app;
}

function routeMatches(pattern: string, path: string): boolean {
  const re = new RegExp(`^${pattern.replace(/:[^/]+/g, '[^/]+')}/?$`);
  return re.test(path);
}
