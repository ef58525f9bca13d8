import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { decide, type RateDecision, type RateLimiter, type RateWindow } from './limiter.ts';

/**
 * Sliding-window log in one Redis sorted set per key, shared by every instance. The Lua script
 * counts and records atomically, so two instances can never both take the last slot.
 * Returns, per window: count, oldest live timestamp (or -1).
 */
const SCRIPT = `
local now = tonumber(ARGV[1])
local member = ARGV[2]
local n = (#ARGV - 2) / 2
local maxw = 0
for i = 1, n do
  local w = tonumber(ARGV[2 + 2 * i])
  if w > maxw then maxw = w end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - maxw)
local out = {}
local allowed = 1
for i = 1, n do
  local limit = tonumber(ARGV[1 + 2 * i])
  local w = tonumber(ARGV[2 + 2 * i])
  local lo = '(' .. tostring(now - w)
  local count = redis.call('ZCOUNT', KEYS[1], lo, '+inf')
  local first = redis.call('ZRANGEBYSCORE', KEYS[1], lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
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

export function redisLimiter(url: string, prefix = 'tollgate:rl:'): RateLimiter {
  const redis = new Redis(url, { maxRetriesPerRequest: 2, enableOfflineQueue: true, lazyConnect: false });
  // Connection errors surface on the commands that need Redis; the event itself must not crash us.
  redis.on('error', () => undefined);
  redis.defineCommand('tollgateHit', { numberOfKeys: 1, lua: SCRIPT });

  return {
    async hit(key: string, windows: RateWindow[], now = Date.now()): Promise<RateDecision> {
      const args: (string | number)[] = [now, `${now}-${randomBytes(6).toString('hex')}`];
      for (const w of windows) args.push(w.limit, w.windowMs);
      const raw = (await (redis as unknown as { tollgateHit(k: string, ...a: (string | number)[]): Promise<(string | number)[]> }).tollgateHit(
        `${prefix}${key}`,
        ...args,
      )) ?? [];
      const counts: number[] = [];
      const oldest: (number | null)[] = [];
      for (let i = 0; i < windows.length; i++) {
        counts.push(Number(raw[2 * i]));
        const first = Number(raw[2 * i + 1]);
        oldest.push(first < 0 ? null : first);
      }
      return decide(now, windows, counts, oldest);
    },
    async close() {
      redis.disconnect();
    },
  };
}
