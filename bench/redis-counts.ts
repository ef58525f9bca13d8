import { Redis } from 'ioredis';
import { cpuMicros } from './proc.ts';

/** What a Redis server has done so far: commands by name (INFO commandstats) and its process's CPU. */
export interface RedisCounts {
  calls: Record<string, number>;
  cpuMicros: number;
  pid: number;
}

/** Reads the counters of the Redis at `url` (its pid from INFO server, so its CPU from /proc). */
export async function redisCounts(url: string): Promise<RedisCounts> {
  const redis = new Redis(url, { lazyConnect: true });
  await redis.connect();
  try {
    const stats = await redis.info('commandstats');
    const server = await redis.info('server');
    const calls: Record<string, number> = {};
    for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]!] = Number(m[2]);
    // INFO itself is counted too: the reader's own commands are subtracted by the caller's delta (the same each time).
    const pid = Number(server.match(/^process_id:(\d+)/m)?.[1]);
    return { calls, cpuMicros: Number.isFinite(pid) ? cpuMicros(pid) : NaN, pid };
  } finally {
    redis.disconnect();
  }
}
