import { randomBytes } from 'node:crypto';
import { Redis, ReplyError } from 'ioredis';
import { DependencyUnavailable } from '../outage.ts';
import { decide, type RateDecision, type RateLimiter, type RateWindow } from './limiter.ts';

/**
 * Sliding-window log in one Redis sorted set per key, shared by every instance. The Lua script
 * counts and records atomically, so two instances can never both take the last slot.
 *
 * The time is Redis's own (`TIME`), never the caller's: hosts whose clocks disagree would otherwise
 * stamp hits in different places and prune each other's hits early, bending the shared window.
 * (Redis 5+ replicates a script's effects, so a write after TIME is allowed; older servers need
 * replicate_commands.)
 * ARGV: a random member suffix, then (limit, windowMs) per window.
 * Returns: Redis's now in ms, then per window: count, and the live hit whose leaving lets one more
 * in (or -1): the oldest, unless the window holds more hits than its limit. The window outlives a
 * configuration (a limit lowered, instances restarted one by one on different limits), and a
 * Retry-After named after the oldest would send the client back to a window still full.
 */
const SCRIPT = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local member = now .. '-' .. ARGV[1]
local n = (#ARGV - 1) / 2
local maxw = 0
for i = 1, n do
  local w = tonumber(ARGV[1 + 2 * i])
  if w > maxw then maxw = w end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - maxw)
local out = { now }
local allowed = 1
for i = 1, n do
  local limit = tonumber(ARGV[2 * i])
  local w = tonumber(ARGV[1 + 2 * i])
  local lo = '(' .. tostring(now - w)
  local count = redis.call('ZCOUNT', KEYS[1], lo, '+inf')
  local frees = math.max(0, count - limit)
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], lo, '+inf', 'WITHSCORES', 'LIMIT', frees, 1)
  out[#out + 1] = count
  out[#out + 1] = first[2] or '-1'
  if count >= limit then allowed = 0 end
end
if allowed == 1 then
  redis.call('ZADD', KEYS[1], now, member)
  redis.call('PEXPIRE', KEYS[1], maxw)
end
return out
`;

/**
 * A request must not wait on a Redis that is gone: with no offline queue a command fails at once
 * while disconnected, and the command timeout bounds one sent to a server that stopped answering
 * (a frozen host, a partition). Reconnection goes on in the background, so recovery needs nothing.
 */
const COMMAND_TIMEOUT_MS = 1_000;
const CONNECT_TIMEOUT_MS = 2_000;

/**
 * Auto-pipelining sends the hits of one event-loop turn, and those issued while a pipeline is in
 * flight, in one socket write: under load a few hits per write, and per read and reply on the Redis side.
 * A hit waiting behind a pipeline in flight has no command timer yet (ioredis starts it when the
 * command is written), so on a frozen Redis it would wait out that pipeline's timeout before its
 * own. The deadline runs from the call instead: at most the 1 s command timeout, as one hit alone.
 * The client's own timeout stays: it ends the pipeline in flight, so hits do not pile up behind it.
 */
function withinCommandTimeout<T>(pending: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('Redis did not answer within the command timeout'), { name: 'TimeoutError' })), COMMAND_TIMEOUT_MS);
  });
  return Promise.race([pending, timedOut]).finally(() => clearTimeout(timer));
}

/**
 * Without an offline queue a command sent while a connection attempt is under way (the first one
 * at start-up, or one after an outage) would fail although Redis is about to answer: the command
 * waits for that attempt, at most its connect timeout. Nothing is kept between calls: each asks
 * the client's current state, so a failed first connection cannot outlive Redis's return (a
 * memoized first-connection promise once did, refusing every request for the process's life).
 * Between attempts (Redis refused or dropped us; the client is waiting to retry) it fails at once.
 */
function connectionAttempts(redis: Redis): () => Promise<void> {
  // One waiter per attempt, shared by the requests that arrive during it (not a listener each);
  // it resolves, never rejects, and is dropped as soon as the attempt ends.
  let waiting: Promise<void> | null = null;
  const waitForAttempt = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        for (const event of ATTEMPT_ENDS) redis.off(event, done);
        waiting = null;
        resolve();
      };
      const timer = setTimeout(done, CONNECT_TIMEOUT_MS);
      for (const event of ATTEMPT_ENDS) redis.on(event, done);
    });
  return () => {
    if (redis.status !== 'connecting' && redis.status !== 'connect') return Promise.resolve();
    return (waiting ??= waitForAttempt());
  };
}

/** The events that end a connection attempt, whichever way it went. */
const ATTEMPT_ENDS = ['ready', 'error', 'close', 'end'] as const;

/**
 * A refusal Redis raises inside our script when a command the script runs is refused (Redis
 * wraps it, e.g. "ERR Error running script ... -MISCONF ..."): still an outage, not a bug.
 */
const REFUSAL_IN_SCRIPT = /\b(MISCONF|NOPERM|NOREPLICAS|NOTREADY|READONLY|LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|OOM|NOAUTH|WRONGPASS)\b/;

/** Redis's own report that the limiter's Lua script is wrong: "ERR Error running/compiling script", "ERR user_script:…". */
const SCRIPT_BUG = /^ERR (Error (running|compiling) script|user_script:|.*@user_script)/;

/**
 * Connection-level failures and every reply that refuses the command (MISCONF after a failed
 * save, NOPERM from an ACL, READONLY after a failover, LOADING, BUSY, OOM, NOAUTH, "ERR max number
 * of clients"...): Redis cannot serve the limiter, so the request is decided by the instance's
 * local share (local-fallback.ts) or, with rateLimits.redisOutage: closed, refused with 503.
 *
 * The one exception is our script failing on its own (a bug in SCRIPT): it stays a 500, and never
 * falls back. A 503 says "retry, it will pass", which is false for a bug on every instance; a 500
 * is logged at error level with the request id, which is what gets a bug looked at. No request is
 * ever served without a limit either way.
 */
export function isRedisOutage(err: unknown): boolean {
  if (err instanceof ReplyError) {
    const message = String((err as Error).message);
    return !SCRIPT_BUG.test(message) || REFUSAL_IN_SCRIPT.test(message);
  }
  return err instanceof Error;
}

/** The key /health's probe writes (under the limiter's prefix); no API key or IP can be named so. */
const PROBE_KEY = '__health-probe__';

export interface RedisLimiter extends RateLimiter {
  /**
   * Throws DependencyUnavailable unless Redis runs the limiter's script, as a request does (for
   * /health): a PING passes while Redis refuses the script's writes (MISCONF) or scripting itself
   * (NOPERM), and /health would call healthy an instance that refuses every chat.
   */
  probe(): Promise<void>;
}

/**
 * The shared limiter. When Redis does not answer, `hit` throws DependencyUnavailable, never lets a
 * request through unlimited: create.ts decides what an outage does (local limits, or a 503).
 */
export function redisLimiter(url: string, prefix = 'tollgate:rl:'): RedisLimiter {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    enableAutoPipelining: true,
    // A hit in flight when the connection drops may have run already (its reply lost): sent again on the
    // new connection it would count twice. Its own deadline decides it instead, as an outage.
    autoResendUnfulfilledCommands: false,
  });
  // Connection errors surface on the commands that need Redis; the event itself must not crash us.
  redis.on('error', () => undefined);
  redis.defineCommand('tollgateHit', { numberOfKeys: 1, lua: SCRIPT });
  const connectionAttempt = connectionAttempts(redis);

  async function send<T>(command: () => Promise<T>): Promise<T> {
    // Inside the try: whatever the connection's state, a failure here is a Redis outage, never an
    // untagged socket error that the error handler could take for a database one.
    try {
      // The command that follows reports an attempt that failed, here inside the try.
      await connectionAttempt();
      return await withinCommandTimeout(command());
    } catch (err) {
      if (isRedisOutage(err)) throw new DependencyUnavailable('redis', { cause: err });
      throw err;
    }
  }

  return {
    /** `_callerNow` is ignored: the window runs on Redis's clock (see SCRIPT). */
    async hit(key: string, windows: RateWindow[], _callerNow?: number): Promise<RateDecision> {
      const args: (string | number)[] = [randomBytes(6).toString('hex')];
      for (const w of windows) args.push(w.limit, w.windowMs);
      const raw = await send(() =>
        (redis as unknown as { tollgateHit(k: string, ...a: (string | number)[]): Promise<(string | number)[]> }).tollgateHit(`${prefix}${key}`, ...args),
      );
      const now = Number(raw[0]);
      const counts: number[] = [];
      const oldest: (number | null)[] = [];
      for (let i = 0; i < windows.length; i++) {
        counts.push(Number(raw[1 + 2 * i]));
        const first = Number(raw[2 + 2 * i]);
        oldest.push(first < 0 ? null : first);
      }
      return decide(now, windows, counts, oldest);
    },
    async probe() {
      // One hit on a key of its own, in a one-second window: the same script, a write, and a key
      // that expires at once (the random member keeps concurrent probes from colliding).
      await this.hit(PROBE_KEY, [{ limit: 1_000_000, windowMs: 1_000 }]);
    },
    async close() {
      redis.disconnect();
    },
  };
}
