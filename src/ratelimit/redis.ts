import { randomBytes } from 'node:crypto';
import { Redis, ReplyError } from 'ioredis';
import { DependencyUnavailable } from '../outage.ts';
import { GRANT_MS, HitGrants } from './hit-grants.ts';
import { decide, type RateDecision, type RateLimiter, type RateWindow } from './limiter.ts';

/**
 * Sliding-window log in one Redis sorted set per key, shared by every instance. The Lua script
 * counts and records atomically, so two instances can never both take the last slot.
 *
 * The time is Redis's own (`TIME`), never the caller's: hosts whose clocks disagree would otherwise
 * stamp hits in different places and prune each other's hits early, bending the shared window.
 * (Redis 5+ replicates a script's effects, so a write after TIME is allowed; older servers need
 * replicate_commands.)
 *
 * Hits granted ahead (hit-grants.ts): an allowed hit may take up to `want` hits at once, never more
 * than the tightest window's room over `share` (so near a limit a grant is one hit, as without
 * grants), every one counted now. The first is the hit being decided, recorded at now; the others
 * are spent by the instance within `later` ms, and are recorded at now + later, so each counts for a
 * whole window after it is spent: granted hits never let more through than the limit.
 * ARGV: a random member suffix, want, share, later, then (limit, windowMs) per window.
 * Returns: Redis's now in ms, the hits granted (0: refused, nothing recorded), then per window:
 * count before this hit, oldest live timestamp (or -1).
 */
const SCRIPT = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local base = now .. '-' .. ARGV[1]
local want = tonumber(ARGV[2])
local share = tonumber(ARGV[3])
local later = tonumber(ARGV[4])
local n = (#ARGV - 4) / 2
local maxw = 0
for i = 1, n do
  local w = tonumber(ARGV[4 + 2 * i])
  if w > maxw then maxw = w end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - maxw)
local out = { now, 0 }
local room = nil
for i = 1, n do
  local limit = tonumber(ARGV[3 + 2 * i])
  local w = tonumber(ARGV[4 + 2 * i])
  local lo = '(' .. tostring(now - w)
  local count = redis.call('ZCOUNT', KEYS[1], lo, '+inf')
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  out[#out + 1] = count
  out[#out + 1] = first[2] or '-1'
  if room == nil or limit - count < room then room = limit - count end
end
if room > 0 then
  local granted = math.max(1, math.min(want, math.floor(room / share)))
  local members = { now, base .. '-0' }
  for j = 1, granted - 1 do
    members[#members + 1] = now + later
    members[#members + 1] = base .. '-' .. j
  end
  redis.call('ZADD', KEYS[1], unpack(members))
  redis.call('PEXPIRE', KEYS[1], maxw + later)
  out[2] = granted
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
export function redisLimiter(url: string, opts: { prefix?: string; instances?: number } = {}): RedisLimiter {
  const prefix = opts.prefix ?? 'tollgate:rl:';
  // A grant takes at most a quarter of a window's room per instance sharing the limit, so the
  // instances together hold at most a quarter of it unspent (given back within 2 × GRANT_MS).
  const share = 4 * Math.max(1, opts.instances ?? 1);
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
  });
  // Connection errors surface on the commands that need Redis; the event itself must not crash us.
  redis.on('error', () => undefined);
  redis.defineCommand('tollgateHit', { numberOfKeys: 1, lua: SCRIPT });
  const connectionAttempt = connectionAttempts(redis);
  const grants = new HitGrants();
  // A connection lost may be a Redis restarted empty: hits it granted are no longer counted, so none is spent.
  redis.on('close', () => grants.clear());
  // Hits granted and not spent in time are given back, so a key's window holds only hits made.
  const sweeper = setInterval(() => {
    const unspent = grants.sweep();
    if (!unspent.length || redis.status !== 'ready') return;
    const pipeline = redis.pipeline();
    for (const u of unspent) pipeline.zrem(`${prefix}${u.key}`, ...u.members);
    pipeline.exec().catch(() => undefined);
  }, GRANT_MS);
  sweeper.unref();

  async function send<T>(command: () => Promise<T>): Promise<T> {
    // Inside the try: whatever the connection's state, a failure here is a Redis outage, never an
    // untagged socket error that the error handler could take for a database one.
    try {
      // The command that follows reports an attempt that failed, here inside the try.
      await connectionAttempt();
      return await command();
    } catch (err) {
      if (isRedisOutage(err)) throw new DependencyUnavailable('redis', { cause: err });
      throw err;
    }
  }

  /** One run of the script: the decision for this hit, and how many hits it granted (this one included). */
  async function ask(key: string, windows: RateWindow[], want: number): Promise<{ decision: RateDecision; granted: number; base: string }> {
    const suffix = randomBytes(6).toString('hex');
    const args: (string | number)[] = [suffix, want, share, GRANT_MS];
    for (const w of windows) args.push(w.limit, w.windowMs);
    const raw = await send(() =>
      (redis as unknown as { tollgateHit(k: string, ...a: (string | number)[]): Promise<(string | number)[]> }).tollgateHit(`${prefix}${key}`, ...args),
    );
    const now = Number(raw[0]);
    const counts: number[] = [];
    const oldest: (number | null)[] = [];
    for (let i = 0; i < windows.length; i++) {
      counts.push(Number(raw[2 + 2 * i]));
      const first = Number(raw[3 + 2 * i]);
      oldest.push(first < 0 ? null : first);
    }
    return { decision: decide(now, windows, counts, oldest), granted: Number(raw[1]), base: `${now}-${suffix}` };
  }

  return {
    /** `_callerNow` is ignored: the window runs on Redis's clock (see SCRIPT). */
    async hit(key: string, windows: RateWindow[], _callerNow?: number): Promise<RateDecision> {
      const ahead = grants.take(key, windows);
      if (ahead) return ahead;
      const asked = grants.want(key);
      const askedAt = performance.now();
      const { decision, granted, base } = await ask(key, windows, asked);
      if (decision.allowed) grants.keep(key, windows, { decision, granted, asked, askedAt, base });
      return decision;
    },
    async probe() {
      // One hit on a key of its own, in a one-second window: the same script, a write, and a key
      // that expires at once (the random member keeps concurrent probes from colliding). Never
      // from a grant: the probe is there to reach Redis.
      await ask(PROBE_KEY, [{ limit: 1_000_000, windowMs: 1_000 }], 1);
    },
    async close() {
      clearInterval(sweeper);
      grants.clear();
      redis.disconnect();
    },
  };
}
