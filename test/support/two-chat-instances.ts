import { startChatHarness, type ChatHarness } from './chat-harness.ts';
import { freshDatabaseUrl } from './engines.ts';
import { startRedis, type RedisServer } from './redis.ts';

/** Two in-process gateways on one fresh PostgreSQL database and one throw-away Redis, with the same config. */
export interface TwoChatInstances {
  redis: RedisServer;
  a: ChatHarness;
  b: ChatHarness;
  stop(): Promise<void>;
}

export async function startTwoChatInstances(config: Record<string, unknown>): Promise<TwoChatInstances> {
  const redis = await startRedis();
  const databaseUrl = await freshDatabaseUrl('postgres');
  const env = { TOLLGATE_REDIS_URL: redis.url };
  const a = await startChatHarness('postgres', config, { env, databaseUrl });
  const b = await startChatHarness('postgres', config, { env, databaseUrl }).catch(async (err) => {
    await a.stop();
    throw err;
  });
  return {
    redis,
    a,
    b,
    async stop() {
      await a.stop();
      await b.stop();
      await redis.stop();
    },
  };
}
