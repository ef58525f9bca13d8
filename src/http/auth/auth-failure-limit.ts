import type { FastifyRequest } from 'fastify';
import type { Services } from '../../services.ts';
import { windowsFrom } from '../../ratelimit/limiter.ts';
import { clientBucket } from '../client-bucket.ts';
import { ApiError } from '../../refusal.ts';

/**
 * Failed authentications (bad API keys, bad SIWE proofs, refused sign-in-with-x headers) are counted per client address (an IPv6
 * client by its /64, see client-bucket.ts) in the shared limiter, under their own key prefix;
 * successes are not counted. Once an address is over
 * its budget it is refused with 429 before its credentials are even looked at, so guessing keys
 * or sending junk proofs (each one a signature check, maybe an RPC call) stops costing anything.
 * One exception, so that a neighbour behind the same carrier NAT or /64 cannot lock honest users
 * out: a credential `admitted` says this instance already knows to be good (an API key a read found
 * active, KeyCache.proven: a memory check, no read) goes on to be checked as usual.
 */
class AuthFailureLimit {
  /** Addresses refused by the shared counter, until when (ms). Per instance, so bounded below. */
  private readonly blockedUntil = new Map<string, number>();

  constructor(private readonly services: Services) {}

  /**
   * Runs `authenticate`; a 401 from it counts as a failure of `request.ip`. `admitted`, asked only
   * while the address is blocked, lets the request through to `authenticate` all the same; it must
   * be pure memory, or junk credentials would cost again what the block saves.
   */
  async guard<T>(request: FastifyRequest, authenticate: () => Promise<T>, admitted?: () => boolean): Promise<T> {
    const attempt = this.enter(request, admitted);
    if (!attempt) return authenticate();
    try {
      return await authenticate();
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 401) throw err;
      await this.countFailure(attempt);
      throw err;
    }
  }

  /**
   * Runs `authenticate`, whose refusals are answers rather than throws (a sign-in-with-x proof
   * refused is a 402 offering payment again): a result `failed` says is refused counts as a
   * failure of `request.ip` as a 401 does in guard, and is returned while the address is under
   * its budget (the 429 once it is over, and before `authenticate` while it is blocked).
   */
  async check<T>(request: FastifyRequest, authenticate: () => Promise<T>, failed: (result: T) => boolean): Promise<T> {
    const attempt = this.enter(request);
    const result = await authenticate();
    if (attempt && failed(result)) await this.countFailure(attempt);
    return result;
  }

  /** Throws the 429 while the client's address is blocked (unless `admitted`); undefined when no limit is configured. */
  private enter(request: FastifyRequest, admitted?: () => boolean): FailureAttempt | undefined {
    const windows = windowsFrom(this.services.config.rateLimits.authFailures);
    if (!windows.length) return undefined;
    const ip = clientBucket(request.ip);
    const now = this.services.now();
    const until = this.blockedUntil.get(ip);
    if (until !== undefined) {
      if (until > now) {
        if (!admitted?.()) throw tooManyFailures(until - now);
      } else this.blockedUntil.delete(ip);
    }
    return { ip, windows, now };
  }

  /** Counts one failure; throws the 429 (and blocks the address) once it is over its budget. */
  private async countFailure({ ip, windows, now }: FailureAttempt): Promise<void> {
    const d = await this.services.limiter.hit(`authfail:${ip}`, windows, now);
    if (d.allowed) return;
    this.services.metrics.rateLimited.inc({ scope: 'authfail' });
    if (this.blockedUntil.size >= 100_000) this.blockedUntil.clear();
    this.blockedUntil.set(ip, now + d.retryAfterMs);
    throw tooManyFailures(d.retryAfterMs);
  }
}

interface FailureAttempt {
  ip: string;
  windows: ReturnType<typeof windowsFrom>;
  now: number;
}

function tooManyFailures(retryAfterMs: number): ApiError {
  return new ApiError(
    429,
    'RATE_LIMITED',
    'too many failed authentications from this address; wait, then retry with a valid API key, SIWE proof or sign-in-with-x header',
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
