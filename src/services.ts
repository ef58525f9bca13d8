import { errorCode } from './error-code.ts';
import { createLimiter } from './ratelimit/create.ts';
import type { Logger } from 'pino';
import { createChainReaders, type ChainReaders } from './chain/readers.ts';
import type { Config } from './config/schema.ts';
import { resolveKeySecret } from './keys/hmac-secret.ts';
import type { Catalog } from './providers/catalog.ts';
import { pricedCatalog } from './providers/price-floor.ts';
import { SiweVerifier } from './siwe/verify.ts';
import { KeyCache } from './keys/key-cache.ts';
import { openStorage, type Storage } from './storage/database.ts';
import type { ProviderAdapter } from './providers/adapter.ts';
import { connectProvider } from './providers/registry.ts';
import { windowsFrom, type RateLimiter, type RateWindow } from './ratelimit/limiter.ts';
import { sql } from 'kysely';
import { createHealthMonitor, type DependencyProbe, type HealthMonitor } from './health-checks.ts';
import { migrateToLatest } from './storage/migrate.ts';
import type { TopupService } from './payments/service.ts';
import { createMetrics, watchSpool, type Metrics } from './metrics/metrics.ts';
import { createDurableSettler, type DurableSettler } from './ledger/spool/durable-settle.ts';
import { spoolLocation } from './ledger/spool/location.ts';
import { SettleSpool } from './ledger/spool/spool-file.ts';
import { createChatDeps, type ChatDeps, type InflightRequest } from './metered/deps.ts';
import { gatewayJobs, startJobs, type RunningJobs } from './background-jobs.ts';
import { noFailPoints, type FailPoints } from './fail-points.ts';

/** Everything a running gateway holds, built once from the configuration and shared by routes. */
export interface Services {
  config: Config;
  logger: Logger;
  storage: Storage;
  catalog: Catalog;
  chains: ChainReaders;
  siwe: SiweVerifier;
  keySecret: Buffer;
  keyCache: KeyCache;
  providers: Map<string, ProviderAdapter>;
  limiter: RateLimiter;
  /** True while rate limits are enforced per instance because Redis does not answer (src/ratelimit/create.ts). */
  rateLimitsDegraded(): boolean;
  /** Null when no top-up offers are configured. */
  topup: TopupService | null;
  metrics: Metrics;
  /** Probes of the database, Redis and each chain's RPC, for /health. */
  health: HealthMonitor;
  /**
   * Chat requests holding a reservation on this instance, so a shutdown can finish what it cuts:
   * what was already delivered is charged, the rest voided.
   */
  inflight: Set<InflightRequest>;
  /** What the chat core uses of all this (src/metered/deps.ts), built once so its state is this gateway's. */
  chat: ChatDeps;
  /** Bills produced answers even through a database outage (retry, then the local spool). */
  settler: DurableSettler;
  rateWindows: { chat: RateWindow[]; keys: RateWindow[]; public: RateWindow[] };
  /** The clock for rate limits and SIWE windows (tests move it). */
  now: () => number;
  /** TEST ONLY fail points (src/fail-points.ts); read at each settle, so a test may change them while the gateway runs. */
  failPoints: FailPoints;
  close(): Promise<void>;
}

export interface ServiceOptions {
  logger: Logger;
  /** Clock override for tests of time windows. */
  now?: () => number;
  /** Run migrations first (the server does; tests of `tollgate migrate` do not). */
  migrate?: boolean;
  /** TEST ONLY: `tollgate serve` passes those of its environment; none by default. */
  failPoints?: FailPoints;
}

export async function createServices(config: Config, opts: ServiceOptions): Promise<Services> {
  const catalog = pricedCatalog(config);
  // Its background checkpointer is started with the other background jobs (background-jobs.ts).
  const storage = openStorage(config.database.url);
  const failPoints = opts.failPoints ?? noFailPoints();
  let jobs: RunningJobs | null = null;
  try {
    if (opts.migrate !== false) {
      const { applied } = await migrateToLatest(storage);
      if (applied.length) opts.logger.info({ applied }, 'database migrated');
    }
    const keySecret = await resolveKeySecret(storage.db, config.secrets.keySecret);
    const chains = await createChainReaders(config.chains);
    const siwe = new SiweVerifier(config.siwe, storage.db, chains, opts.now);

    const now = opts.now ?? Date.now;
    const metrics = createMetrics(storage.db);
    const { limiter, probe: redisProbe, degraded: rateLimitsDegraded } = await createLimiter(config, opts.logger, metrics.registry);
    const providers = createProviders(config);

    const location = spoolLocation(config.database.url, config.ledger.spoolDir);
    const spool = SettleSpool.open(location.dir, location.fingerprint);
    watchSpool(metrics, () => spool.writable());
    const settler = createDurableSettler({
      storage,
      spool,
      logger: opts.logger,
      failure: () => failPoints.settleFailure,
      onApplied: (record, outcome) => {
        if (outcome.chargedUsdc) metrics.chargedUsdc.inc({ model: record.usage.model }, outcome.chargedUsdc);
      },
      onUnbilled: (record) => {
        metrics.unbilledAnswers.inc({ model: record.usage.model });
        metrics.unbilledUsdc.inc({ model: record.usage.model }, record.chargeUsdc);
      },
    });
    if (failPoints.settleFailure) opts.logger.warn('TEST HOOK TOLLGATE_TEST_SETTLE_FAILURE is on: settles fail as if the database did not answer');
    const inflight: Services['inflight'] = new Set();

    // Top-ups (x402, viem's chain code) are loaded only when offers are configured: start-up time, idle memory.
    const topup =
      config.topup.offers.length === 0
        ? null
        : (await import('./payments/service.ts')).createTopupService(config, {
            db: storage.db,
            engine: storage.engine,
            chains,
            logger: opts.logger,
            now,
            hangBeforeBroadcast: failPoints.hangBeforeBroadcast,
            countUptoUnsettled: () => metrics.uptoUnsettled.inc(),
            uptoMetrics: { resent: () => metrics.uptoSettlesResent.inc(), stuck: (n) => metrics.uptoSettlesStuck.set(n) },
          });
    if (topup?.relayer) {
      const { watchRelayerGas } = await import('./payments/relayer/relayer-gas.ts');
      watchRelayerGas(metrics.registry, topup.relayer, [...new Set(config.topup.offers.map((o) => o.network))], topup.clientFor, opts.logger);
    }
    // Last, once everything they use is built: they stop first in close() below.
    const retention = config.retention.enabled
      ? (await import('./retention/retention-job.ts')).retentionJob(storage, config.retention, {
          now,
          logger: opts.logger,
          afterExport: failPoints.retentionFailure
            ? () => {
                throw new Error('TEST HOOK: retention stopped after its export');
              }
            : undefined,
        })
      : null;
    const checkpointEvery = checkpointEverySeconds(config.ledger.checkpointEverySeconds, storage.engine);
    const ledgerCheckpoints =
      checkpointEvery > 0
        ? (await import('./retention/checkpoint-job.ts')).checkpointJob(storage, {
            periodSeconds: checkpointEvery,
            now,
            logger: opts.logger,
            failures: metrics.ledgerCheckFailures,
            // SQLite: each pass in a worker thread with a connection of its own, off the event loop the requests share.
            workerDatabaseUrl: storage.engine === 'sqlite' && !config.database.url.includes(':memory:') ? config.database.url : null,
            failPoint: failPoints.checkpointFailure,
          })
        : null;
    const channelClaims =
      config.payPerRequest.batchSettlement.enabled && topup
        ? await (async () => {
            const [{ channelClaimJob, claimMetrics }, { CLAIM_LEASE }, { namedLease }] = await Promise.all([
              import('./payments/channels/claims/claim-job.ts'),
              import('./payments/channels/claims/claim-pass.ts'),
              import('./retention/job-lease.ts'),
            ]);
            const lease = namedLease(storage.db, CLAIM_LEASE);
            const { facilitator, clientFor } = topup;
            const claimConfig = config.payPerRequest.batchSettlement;
            return channelClaimJob({
              db: storage.db,
              lease,
              facilitator,
              clientFor,
              config: claimConfig,
              logger: opts.logger,
              now,
              metrics: claimMetrics(metrics),
            });
          })()
        : null;
    const leaseMs = config.chat.reservationLeaseSeconds * 1000;
    jobs = await startJobs(
      gatewayJobs({ storage, settler, spool, inflight, leaseMs, now, topup, logger: opts.logger, retention, ledgerCheckpoints, channelClaims }),
    );

    const services: Omit<Services, 'chat'> = {
      config,
      topup,
      metrics,
      settler,
      health: createHealthMonitor(dependencyProbes(config, storage, chains, redisProbe), (name, status, err) =>
        status === 'down'
          ? opts.logger.warn({ dependency: name, reason: outageReason(err) }, 'dependency is down')
          : opts.logger.info({ dependency: name }, 'dependency answers again'),
      ),
      inflight,
      logger: opts.logger,
      storage,
      catalog,
      chains,
      siwe,
      keySecret,
      keyCache: new KeyCache(config.keys.lookupCacheSeconds * 1000, opts.now),
      providers,
      limiter,
      rateLimitsDegraded,
      rateWindows: { chat: windowsFrom(config.rateLimits.chat), keys: windowsFrom(config.rateLimits.keys), public: windowsFrom(config.rateLimits.public) },
      now,
      failPoints,
      async close() {
        await jobs?.stop();
        await Promise.allSettled([...providers.values()].map((p) => p.close()));
        await limiter.close();
        await storage.close();
      },
    };
    // Over the container itself, so a piece replaced at run time reaches the chat core (see deps.ts).
    return Object.assign(services, { chat: createChatDeps(services) });
  } catch (err) {
    await jobs?.stop().catch(() => undefined);
    await storage.close().catch(() => undefined);
    throw err;
  }
}

/**
 * The database is required: without it no request can be authorised or billed, so the instance
 * reports itself unhealthy and a load balancer drains it. Redis is required only with
 * `rateLimits.redisOutage: closed` (src/ratelimit/create.ts). A chain's RPC is
 * reported but not required: only top-ups and contract-wallet sign-ins need it (they answer 503
 * meanwhile), and chat, keys and usage keep working, so draining would turn a partial outage into
 * a full one.
 */
function dependencyProbes(config: Config, storage: Storage, chains: ChainReaders, redis: DependencyProbe | null): DependencyProbe[] {
  const probes: DependencyProbe[] = [{ name: 'database', required: true, check: () => sql`select 1`.execute(storage.db) }];
  if (redis) probes.push(redis);
  for (const id of Object.keys(config.chains)) {
    // cacheTime 0: viem otherwise answers getBlockNumber from its cache for a few seconds.
    probes.push({ name: `rpc:${id}`, required: false, check: () => chains.client(Number(id)).getBlockNumber({ cacheTime: 0 }) });
  }
  return probes;
}

/** A short reason for the log: an error code or name, never a message (an RPC URL may hold an API key). */
function outageReason(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  // Our own pool-wait timeout has no code; its message says how long it waited and holds no secret.
  if (typeof e?.code !== 'string' && typeof e?.message === 'string' && e.message.startsWith('no answer within')) return e.message;
  return errorCode(err);
}

function createProviders(config: Config): Map<string, ProviderAdapter> {
  const timeouts = {
    connectMs: config.chat.connectTimeoutSeconds * 1000,
    firstByteMs: config.chat.firstByteTimeoutSeconds * 1000,
    idleMs: config.chat.idleTimeoutSeconds * 1000,
  };
  const adapters = new Map<string, ProviderAdapter>();
  for (const [name, p] of Object.entries(config.providers)) {
    adapters.set(name, connectProvider(name, p, config.secrets.providerKeys[name], timeouts));
  }
  return adapters;
}

/**
 * The checkpoint job's period: as configured, else 60 s on PostgreSQL (the check's queries run in
 * the database server) and off on SQLite. There the pass runs in a worker thread with its own
 * connection (src/retention/checkpoint-thread.ts), so it no longer holds the event loop, but it
 * still takes a core the serving thread needs near saturation: at 1,000 streams/s on 2 cores the
 * time-to-first-token p99 was about 5× higher with the job on than off (bench/README.md, docs/DECISIONS.md).
 */
export function checkpointEverySeconds(configured: number | undefined, engine: 'sqlite' | 'postgres'): number {
  return configured ?? DEFAULT_CHECKPOINT_SECONDS[engine];
}

const DEFAULT_CHECKPOINT_SECONDS = { sqlite: 0, postgres: 60 } as const;
