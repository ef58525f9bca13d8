import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApp, type AppOptions } from './app.ts';
import type { Config } from './config/schema.ts';
import { addAcceptWatchers, type AcceptWatchers } from './http/accept-watchers.ts';
import { createLogger } from './http/logger.ts';
import { createServices, type Services } from './services.ts';
import { failPointsFromEnv, type FailPoints } from './fail-points.ts';
import { startMetricsServer } from './http/routes/metrics.ts';
import { startupSummary } from './startup-summary.ts';

export interface RunningServer {
  app: FastifyInstance;
  services: Services;
  url: string;
  /** Where /metrics is served when it has its own port (`metrics.port`, the default). */
  metricsUrl: string | null;
  /**
   * Graceful stop: refuse new connections, let in-flight requests finish (and settle) for up to
   * `graceMs` (default server.shutdownGraceSeconds), then cut those still running (a stream that
   * delivered content is charged for it, the rest are voided), close their connections, and close
   * the database.
   */
  stop(opts?: { graceMs?: number }): Promise<void>;
  /**
   * Connections accepted so far on the copies of the listening socket (`server.acceptCopies`,
   * src/http/accept-watchers.ts) rather than on the server's own descriptor: 0 when none were made.
   */
  acceptedByCopies(): number;
}

/** Builds the services and the app, and listens. Used by `tollgate serve` and by tests. */
export async function startServer(
  config: Config,
  opts: { logger?: Logger; now?: () => number; failPoints?: FailPoints } & AppOptions = {},
): Promise<RunningServer> {
  const logger = opts.logger ?? createLogger(config.logging.level);
  const services = await createServices(config, { logger, now: opts.now, failPoints: opts.failPoints });
  const app = await buildApp(services, { demoWallet: opts.demoWallet });
  let acceptWatchers: AcceptWatchers | undefined;
  // Before the server stops accepting: the copies of its socket stop too (see accept-watchers.ts).
  app.addHook('preClose', (done) => {
    acceptWatchers?.close();
    done();
  });
  try {
    await app.listen({ host: config.server.host, port: config.server.port });
  } catch (err) {
    await services.close();
    throw err;
  }
  acceptWatchers = await addAcceptWatchers(app.server, config.server.acceptCopies, logger);
  let metricsServer: Awaited<ReturnType<typeof startMetricsServer>> | null = null;
  // With a token, /metrics is on the API port (app.ts); without one, only on its own port.
  if (config.metrics.enabled && config.metrics.tokenEnv === undefined) {
    try {
      metricsServer = await startMetricsServer(services);
    } catch (err) {
      await app.close();
      await services.close();
      throw err;
    }
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.server.port;
  const host = config.server.host === '0.0.0.0' ? '127.0.0.1' : config.server.host;
  let stopping: Promise<void> | undefined;
  return {
    app,
    services,
    url: `http://${host}:${port}`,
    metricsUrl: metricsServer?.url ?? null,
    acceptedByCopies: () => acceptWatchers?.accepted ?? 0,
    stop(opts = {}) {
      stopping ??= (async () => {
        const graceMs = opts.graceMs ?? config.server.shutdownGraceSeconds * 1000;
        const closed = Promise.all([app.close(), metricsServer?.close()]);
        // A keep-alive connection whose request finishes during the grace becomes idle after the
        // close began; close those as they appear, or they would hold the server open to the end.
        const idleSweep = setInterval(() => app.server.closeIdleConnections(), 100);
        const late = await outlasts(closed, graceMs).finally(() => clearInterval(idleSweep));
        if (late) {
          const cut = services.inflight.size;
          await Promise.allSettled([...services.inflight].map((bill) => bill.cutShort('shutdown')));
          app.server.closeAllConnections();
          await Promise.allSettled([...services.providers.values()].map((p) => p.destroy()));
          services.logger.warn({ cut }, 'shutdown grace ran out; cut the requests still running (charged what they had delivered, voided the rest)');
          await outlasts(closed, 2_000);
        }
        await services.close();
      })();
      return stopping;
    },
  };
}

/** True when `work` is still running after `ms`. */
async function outlasts(work: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((r) => (timer = setTimeout(() => r(true), ms)));
  const result = await Promise.race([work.then(() => false), late]);
  clearTimeout(timer);
  return result;
}

/**
 * The life of a long-running command: a logger that also reports (and survives) unhandled
 * rejections, `start`, then on SIGTERM or SIGINT `stop`, bounded by `forceExitMs` in case closing
 * hangs. Shared by `tollgate serve` and `tollgate facilitator`.
 */
async function runProcess(config: Config, start: (logger: Logger) => Promise<() => Promise<unknown>>, forceExitMs: number): Promise<void> {
  const logger = createLogger(config.logging.level);
  process.on('unhandledRejection', (reason) => logger.error({ err: reason }, 'unhandled promise rejection (kept running)'));
  const stop = await start(logger);
  await new Promise<void>((resolveDone) => {
    const onSignal = (signal: string) => {
      logger.info({ signal }, 'shutting down');
      const force = setTimeout(() => {
        logger.error('shutdown took too long; exiting');
        process.exit(1);
      }, forceExitMs);
      force.unref();
      stop().then(
        () => resolveDone(),
        (err) => {
          logger.error({ err }, 'error during shutdown');
          process.exit(1);
        },
      );
    };
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  });
}

/** `tollgate serve`: runs until SIGTERM or SIGINT, then shuts down gracefully (see RunningServer.stop). */
export function runUntilSignalled(config: Config): Promise<void> {
  const graceMs = config.server.shutdownGraceSeconds * 1000;
  return runProcess(
    config,
    async (logger) => {
      // The test-only fail points come from this process's environment, never from the config file.
      const server = await startServer(config, { logger, failPoints: failPointsFromEnv(process.env) });
      const summary = startupSummary(config, server);
      logger.info(summary, `tollgate listening on ${server.url}`);
      for (const { provider, variable } of summary.providersWithoutKey) {
        logger.warn(
          { provider, variable },
          `provider ${provider} has no API key: set ${variable} and restart; until then its models answer 503 PROVIDER_NOT_CONFIGURED`,
        );
      }
      for (const { settings, message } of summary.warnings) logger.warn({ settings }, message);
      if (summary.x402v1BodyOmits.length > 0) {
        const left = summary.x402v1BodyOmits.map((o) => `${o.name} ${o.asset} on ${o.network} (${o.reason})`).join('; ');
        const none = summary.x402v1BodyOmits.length === config.topup.offers.length;
        logger.warn(
          { omitted: summary.x402v1BodyOmits },
          `topup.x402v1Body: the x402 v1 402 body leaves out ${left}. ${none ? 'No offer is left for x402 v1 clients' : 'x402 v1 clients cannot pay those'}; x402 v2 clients (the PAYMENT-REQUIRED header) can pay every offer`,
        );
      }
      return () => server.stop();
    },
    // A last resort if closing the database itself hangs.
    graceMs + 10_000,
  );
}

/** `tollgate facilitator`: the local facilitator over HTTP, until SIGTERM or SIGINT. */
export function runFacilitatorUntilSignalled(config: Config, opts: { host: string; port: number; token?: string }): Promise<void> {
  return runProcess(
    config,
    async (logger) => {
      // Loaded here, not at the top: the gateway itself does not need x402's facilitator.
      const { startFacilitatorServer } = await import('./http/facilitator-server.ts');
      const { app, url, relayer } = await startFacilitatorServer(config, { ...opts, logger });
      if (!opts.token && opts.host !== '127.0.0.1' && opts.host !== 'localhost') {
        logger.warn(
          "the facilitator listens beyond this host without TOLLGATE_FACILITATOR_TOKEN; anyone who can reach it can spend the relayer's gas on payments to payTo",
        );
      }
      logger.info({ url, relayer, networks: config.topup.offers.map((o) => o.network) }, 'tollgate facilitator listening');
      return () => app.close();
    },
    10_000,
  );
}
