import type { FastifyReply } from 'fastify';
import type { RateWindow } from '../ratelimit/limiter.ts';
import type { Services } from '../services.ts';
import { ApiError } from '../refusal.ts';

/**
 * Counts one request against `key` and sets the X-RateLimit-* headers (Reset is a Unix time in
 * seconds). Over the limit it throws the 429, before anything reaches a provider or the ledger.
 */
export async function enforceRateLimit(services: Services, reply: FastifyReply, key: string, windows: RateWindow[]): Promise<void> {
  if (!windows.length) return;
  const d = await services.limiter.hit(key, windows, services.now());
  reply.header('x-ratelimit-limit', d.limit);
  reply.header('x-ratelimit-remaining', d.remaining);
  reply.header('x-ratelimit-reset', Math.ceil(d.resetAt / 1000));
  if (!d.allowed) {
    services.metrics.rateLimited.inc({ scope: key.slice(0, key.indexOf(':')) });
    throw new ApiError(
      429,
      'RATE_LIMITED',
      'rate limit exceeded',
      { retry_after_ms: d.retryAfterMs },
      { 'retry-after': String(Math.max(1, Math.ceil(d.retryAfterMs / 1000))) },
    );
  }
}
