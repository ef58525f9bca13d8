import { newRequestId } from './http/request-id.ts';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { errorHandler, frameworkErrorHandler } from './http/errors.ts';
import { ApiError } from './refusal.ts';
import { markRouteFamily } from './http/error-format.ts';
import { chatRoutes } from './http/routes/chat.ts';
import { embeddingsRoutes } from './http/routes/embeddings.ts';
import { responseRoutes } from './http/routes/responses.ts';
import { healthRoutes } from './http/routes/health.ts';
import { siweInfoRoutes } from './http/routes/siwe-info.ts';
import { keyRoutes } from './http/routes/keys.ts';
import { modelRoutes } from './http/routes/models.ts';
import { usageRoutes } from './http/routes/usage.ts';
import { sessionRoutes } from './http/routes/sessions.ts';
import { dashboardRoutes, type DemoWallet } from './http/routes/dashboard.ts';
import { topupRoutes } from './http/routes/topup.ts';
import { channelRefundRoutes } from './http/routes/channel-refund.ts';
import { topupHistoryRoutes } from './http/routes/topups.ts';
import cors from '@fastify/cors';
import { docsRoutes } from './http/routes/docs.ts';
import { metricsRoutes } from './http/routes/metrics.ts';
import { boundedJsonParser } from './http/json-body.ts';
import { lingerAfterEarlyAnswers } from './http/lingering-close.ts';
import type { Services } from './services.ts';

export interface RegisteredRoute {
  method: string;
  url: string;
  /** Answers errors in OpenAI's shape when `errors.format: openai` (see http/error-format.ts). */
  openaiCompatible: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route the app serves, for 405 answers and the OpenAPI completeness test. */
    registeredRoutes: RegisteredRoute[];
  }
}

export interface AppOptions {
  /** `tollgate demo` only: its throw-away wallet, offered in the dashboard page. */
  demoWallet?: DemoWallet;
}

export async function buildApp(services: Services, opts: AppOptions = {}): Promise<FastifyInstance> {
  const { server, limits } = services.config;
  const errorFormat = services.config.errors.format;
  const app = Fastify({
    loggerInstance: services.logger as FastifyBaseLogger,
    bodyLimit: limits.bodyBytes,
    // Proxy headers only from the configured hops or addresses: with `true`, any client could pick
    // the address every per-IP limit sees by sending X-Forwarded-For. (A hop count is valid for
    // Fastify, which hands it to proxy-addr; its type only lists the other forms.)
    trustProxy: server.trustProxy as boolean | string[],
    // Slowloris: headers, and the whole request with its body, must arrive in bounded time. These
    // bound receiving the request only; a streamed answer may last as long as it needs.
    requestTimeout: server.requestTimeoutSeconds * 1000,
    http: {
      headersTimeout: server.headersTimeoutSeconds * 1000,
      requestTimeout: server.requestTimeoutSeconds * 1000,
      // Node enforces both only when it sweeps its connections (every 30 s by default).
      connectionsCheckingInterval: Math.min(1000, server.headersTimeoutSeconds * 250),
    },
    genReqId: newRequestId,
    // Fastify's own answers (a bad URL, an over-long path parameter) in our error shape, and without
    // quoting the URL: its query string can carry a SIWE signature.
    frameworkErrors: frameworkErrorHandler(errorFormat),
    // One access-log line per request, written when it ends (onResponse below), instead of
    // Fastify's two: half the log volume, and the line has everything (method, url, status, time).
    logController: new LogController({ disableRequestLogging: true }),
  });

  const routes: RegisteredRoute[] = [];
  app.decorate('registeredRoutes', routes);
  app.addHook('onRoute', (route) => {
    // HEAD and OPTIONS (CORS preflight) are answered for every route; they are not API endpoints.
    for (const method of [route.method].flat())
      if (method !== 'HEAD' && method !== 'OPTIONS') routes.push({ method, url: route.url, openaiCompatible: route.config?.openaiCompatible === true });
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    request.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
    // The route pattern, never the raw URL: wallet addresses and ids would explode the label set.
    services.metrics.requests.inc({ method: request.method, route: request.routeOptions.url ?? 'unmatched', status: reply.statusCode });
  });

  // JSON only: any other body type is refused with 415 instead of being half-understood.
  app.removeContentTypeParser('text/plain');
  boundedJsonParser(app, { maxDepth: limits.jsonMaxDepth, maxValues: limits.jsonMaxValues });
  // Time is the real bound; the byte bound (4x the largest body limit: 16 MiB at the defaults) lets
  // a client that sent a few times too much read its 413 and cuts a firehose early.
  lingerAfterEarlyAnswers(app, { maxMs: server.lingerSeconds * 1000, maxBytes: 4 * Math.max(limits.bodyBytes, limits.chatBodyBytes) });

  app.setErrorHandler(errorHandler(errorFormat));
  app.setNotFoundHandler((request) => {
    const path = request.url.split('?')[0]!;
    const matching = routes.filter((r) => routeMatches(r.url, path));
    if (matching.length) {
      const allowed = matching.map((r) => r.method);
      markRouteFamily(
        request,
        matching.some((r) => r.openaiCompatible),
      );
      throw new ApiError(
        405,
        'METHOD_NOT_ALLOWED',
        `${request.method} is not supported on ${path}; use ${allowed.join(' or ')}`,
        {},
        { allow: allowed.join(', ') },
      );
    }
    throw new ApiError(404, 'NOT_FOUND', `no route ${request.method} ${path}; see GET /v1/models, POST /v1/auth/keys, GET /v1/usage/:wallet`);
  });

  // Browsers may call the API from any origin (credentials are headers, never cookies). x402 needs
  // its headers readable and sendable cross-origin, or a browser @x402/fetch cannot pay. The lists
  // are joined once here: given arrays, the plugin joins them again for every response.
  await app.register(cors, {
    origin: services.config.server.corsOrigins.includes('*') ? '*' : services.config.server.corsOrigins,
    methods: ['GET', 'POST', 'PATCH', 'DELETE'],
    // Besides the x402 ones, what the stock SDKs send from a browser on every request (openai-node's
    // and @anthropic-ai/sdk's x-stainless-* platform headers; Anthropic's key, version and browser
    // opt-in) and the headers the chat routes read: a header missing here fails the preflight, and
    // the browser never sends the request at all. No credential is a cookie, so naming more is safe.
    allowedHeaders: [
      'content-type',
      'authorization',
      'payment-signature',
      'x-payment',
      'sign-in-with-x',
      'access-control-expose-headers',
      'x-api-key',
      'anthropic-version',
      'anthropic-beta',
      'anthropic-dangerous-direct-browser-access',
      'x-tollgate-fit-max-tokens',
      'openai-organization',
      'openai-project',
      'x-stainless-arch',
      'x-stainless-lang',
      'x-stainless-os',
      'x-stainless-package-version',
      'x-stainless-retry-count',
      'x-stainless-runtime',
      'x-stainless-runtime-version',
      'x-stainless-timeout',
      'x-stainless-helper-method',
      'x-stainless-poll-helper',
      'x-stainless-custom-poll-interval',
    ].join(', '),
    exposedHeaders: [
      'payment-required',
      'payment-response',
      'x-payment-response',
      'x-request-id',
      'retry-after',
      'x-ratelimit-limit',
      'x-ratelimit-remaining',
      'x-ratelimit-reset',
      'x-tollgate-charged-usdc',
      'x-tollgate-balance-usdc',
      // What the answers say beside their body, readable by page script too: whether an SDK should
      // retry (without it the SDKs retry what the gateway marks as pointless), the billing's state,
      // what was changed or dropped from the request, where it was served and what was stored.
      'x-should-retry',
      'x-tollgate-billing',
      'x-tollgate-usage-estimated',
      'x-tollgate-deployment',
      'x-tollgate-max-tokens',
      'x-tollgate-max-tokens-fitted',
      'x-tollgate-betas-dropped',
      'x-tollgate-fields-dropped',
      'x-tollgate-store',
    ].join(', '),
    maxAge: 600,
    // An OPTIONS request that is not a full preflight gets the normal answer, not a plain-text 400.
    strictPreflight: false,
  });

  healthRoutes(app, services);
  modelRoutes(app, services);
  siweInfoRoutes(app, services);
  keyRoutes(app, services);
  sessionRoutes(app, services);
  usageRoutes(app, services);
  chatRoutes(app, services);
  embeddingsRoutes(app, services);
  responseRoutes(app, services);
  topupRoutes(app, services);
  channelRefundRoutes(app, services);
  topupHistoryRoutes(app, services);
  docsRoutes(app, services);
  if (services.config.dashboard.enabled) dashboardRoutes(app, services, opts.demoWallet);
  // On the API port only behind its bearer token; otherwise main.ts serves it on the metrics port.
  const { metrics, secrets } = services.config;
  if (metrics.enabled && metrics.tokenEnv !== undefined && secrets.metricsToken) metricsRoutes(app, services, secrets.metricsToken);
  await app.ready();
  return app;
}

function routeMatches(pattern: string, path: string): boolean {
  const re = new RegExp(`^${pattern.replace(/:[^/]+/g, '[^/]+').replace(/\*$/, '.+')}$`);
  return re.test(path);
}
