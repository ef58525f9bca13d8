import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Config } from '../config/schema.ts';
import type { DependencyProbe } from '../health-checks.ts';
import { errorCode } from '../error-code.ts';
import type { RateLimiter } from './limiter.ts';
import { memoryLimiter } from './memory.ts';

export interface ConfiguredLimiter {
  limiter: RateLimiter;
  /** Redis's /health probe; null with the in-memory backend. */
  probe: DependencyProbe | null;
  /** True while the limits are enforced per instance because Redis does not answer. */
  degraded(): boolean;
}

/**
 * The limiter `rateLimits` asks for. With Redis, `redisOutage` says what a Redis outage does:
 * `local` (the default) keeps serving with each instance enforcing its share of the limits
 * (local-fallback.ts), and /health reports Redis as down without draining the instance;
 * `closed` refuses every rate-limited request with 503 and drains the instance until Redis answers.
 */
export async function createLimiter(config: Config, logger: Logger, registry: Registry): Promise<ConfiguredLimiter> {
  const { rateLimits } = config;
  if (rateLimits.backend === 'memory') return { limiter: memoryLimiter(), probe: null, degraded: () => false };
  const url = config.secrets.redisUrl;
  if (!url) throw new Error(`rateLimits.backend is redis but ${rateLimits.redisUrlEnv} is not set; set it to redis://host:6379`);
  // ioredis is loaded only for the redis backend.
  const { redisLimiter } = await import('./redis.ts');
  const shared = redisLimiter(url);
  if (rateLimits.redisOutage === 'closed') {
    return { limiter: shared, probe: { name: 'redis', required: true, check: () => shared.probe() }, degraded: () => false };
  }
  const { withLocalFallback } = await import('./local-fallback.ts');
  const localDecisions = new Counter({
    name: 'tollgate_ratelimit_local_decisions_total',
    help: 'Rate-limit decisions made by this instance alone (its share of the limits) because Redis did not answer',
    registers: [registry],
  });
  const limiter = withLocalFallback(shared, rateLimits.instances, {
    onLocalDecision: () => localDecisions.inc(),
    onChange(degraded, err) {
      if (degraded) {
        logger.warn(
          // The client's own error (ECONNREFUSED, a timeout, MISCONF…) is the cause of the outage tag.
          { dependency: 'redis', reason: errorCode((err as { cause?: unknown } | undefined)?.cause ?? err), instances: rateLimits.instances },
          `Redis is not answering: rate limits are enforced by each instance alone, ` +
            `at 1/${rateLimits.instances} of each limit (rateLimits.instances), until it answers`,
        );
      } else logger.info({ dependency: 'redis' }, 'Redis answers again: rate limits are shared again');
    },
  });
  new Gauge({
    name: 'tollgate_ratelimit_degraded',
    help: 'Whether rate limits are enforced per instance because Redis does not answer: 1 yes, 0 no',
    registers: [registry],
    collect() {
      this.set(limiter.degraded() ? 1 : 0);
    },
  });
  // Not required: draining every instance because the pacing store is down would be the full outage this avoids.
  return { limiter, probe: { name: 'redis', required: false, check: () => limiter.probe() }, degraded: () => limiter.degraded() };
}
