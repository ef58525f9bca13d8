import type { FastifyRequest } from 'fastify';
import type { Services } from '../services.ts';
import { windowsFrom } from '../ratelimit/limiter.ts';
import { clientBucket } from './client-bucket.ts';
import { ApiError } from '../refusal.ts';

/**
 * Failed authentications (bad API keys, bad SIWE proofs) are counted per client address (an IPv6
 * client by its /64, see client-bucket.ts) in the shared limiter, under their own key prefix;
 * successes are not counted. Once an address is over
 * its budget it is refused with 429 before its credentials are even looked at, so guessing keys
 * or sending junk proofs (each one a signature check, maybe an RPC call) stops costing anything.
 */
class AuthFailureLimit {
  /** Addresses refused by the shared counter, until when (ms). Per instance, so bounded below. */
  private readonly blockedUntil = new Map<string, number>();

  constructor(private readonly services: Services) {}

  /** Runs `authenticate`; a 401 from it counts as a failure of `request.ip`. */
  async guard<T>(request: FastifyRequest, authenticate: () => Promise<T>): Promise<T> {
    const windows = windowsFrom(this.services.config.rateLimits.authFailures);
    if (!windows.length) return authenticate();
    const ip = clientBucket(request.ip);
    const now = this.services.now();
    const until = this.blockedUntil.get(ip);
    if (until !== undefined) {
      if (until > now) throw tooManyFailures(until - now);
      this.blockedUntil.delete(ip);
    }
    try {
      return await authenticate();
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 401) throw err;
      const d = await this.services.limiter.hit(`authfail:${ip}`, windows, now);
      if (d.allowed) throw err;
      this.services.metrics.rateLimited.inc({ scope: 'authfail' });
      if (this.blockedUntil.size >= 100_000) this.blockedUntil.clear();
      this.blockedUntil.set(ip, now + d.retryAfterMs);
      throw tooManyFailures(d.retryAfterMs);
    }
  }
}

function tooManyFailures(retryAfterMs: number): ApiError {
  return new ApiError(
    429,
    'RATE_LIMITED',
    'too many failed authentications from this address; wait, then retry with a valid API key or SIWE proof',
    { retry_after_ms: retryAfterMs },
    { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
  );
}

const limits = new WeakMap<Services, AuthFailureLimit>();

/** The failure limit of this gateway (one per Services, created on first use). */
export function authFailureLimit(services: Services): AuthFailureLimit {
  let limit = limits.get(services);
  if (!limit) limits.set(services, (limit = new AuthFailureLimit(services)));
  return limit;
}
