import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { freePort } from '../../src/devchain/ports.ts';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { stopChild, track, waitForOutput } from '../support/children.ts';
import { tempDir } from '../support/engines.ts';
import { until } from '../support/until.ts';
import { assertOutageAnswer, chatBody, waitForHealth } from './support.ts';

/** A redis-server of this test's own (the support one cannot be made to refuse writes). */
async function redisServer(port: number, args: string[]): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--appendonly', 'no', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  await waitForOutput(child, /Ready to accept connections/, 'redis-server');
  child.stdout?.resume();
  child.stderr?.resume();
  return child;
}

/** A gateway whose limits are in the Redis at `url`, high enough that only Redis refuses. */
function gatewayOn(url: string): Promise<ChatHarness> {
  const limits = { backend: 'redis', redisOutage: 'closed', chat: { perMinute: 1000 }, keys: { perMinute: 1000 }, public: { perMinute: 1000 } } as const;
  return startChatHarness('sqlite', { rateLimits: limits }, { env: { TOLLGATE_REDIS_URL: url } });
}

/** /health must see what requests see (its report is cached for a second): Redis down, instance drained. */
async function assertHealthSeesRedisDown(url: string): Promise<void> {
  await until(async () => (await call(url, 'GET', '/health')).status === 503, '/health reports the instance unhealthy', 5_000);
  const health = await call(url, 'GET', '/health');
  assert.equal(health.body?.checks?.redis, 'down', health.text);
}

/**
 * Attack: Redis answers, but refuses the limiter's script: MISCONF (its disk failed: writes are
 * refused until a save succeeds) or NOPERM (an ACL that denies scripting). Expected: 503 naming
 * redis (a dependency that cannot serve), never a 500.
 */
describe('attack: Redis up but refusing the limiter script', () => {
  let child: ChildProcess;
  let url: string;
  let h: ChatHarness;
  let admin: Redis;
  before(async () => {
    const port = await freePort();
    const dir = tempDir();
    // The snapshot's final name is a non-empty directory: every BGSAVE fails at its rename, and
    // Redis (stop-writes-on-bgsave-error yes, the default) then refuses writes with MISCONF.
    child = await redisServer(port, ['--dir', dir, '--dbfilename', 'dump.rdb', '--save', '3600 1']);
    // (made once Redis has started: it would try to load it at start-up)
    mkdirSync(join(dir, 'dump.rdb'));
    writeFileSync(join(dir, 'dump.rdb', 'x'), 'x');
    url = `redis://127.0.0.1:${port}`;
    admin = new Redis(url);
    h = await gatewayOn(url);
  });
  after(async () => {
    await h?.stop();
    admin?.disconnect();
    if (child) await stopChild(child, 'SIGKILL');
  });

  test('MISCONF: chat answers 503 naming redis, never 500', async () => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
    const w = await h.wallet(1_000_000);
    const auth = { authorization: `Bearer ${w.key}` };
    await waitForHealth(h.gw.url, 'ok');
    assert.equal((await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth)).status, 200);
    await admin.bgsave();
    await until(async () => /rdb_last_bgsave_status:err/.test(await admin.info('persistence')), 'the BGSAVE failed', 20_000);
    await assert.rejects(admin.set('probe', '1'), /MISCONF/);
    const res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth);
    assertOutageAnswer(res, 'redis', 'chat while Redis answers MISCONF');
    await assertHealthSeesRedisDown(h.gw.url);
  });

  test('NOPERM: an ACL denying scripting: chat answers 503 naming redis, never 500', async () => {
    await admin.config('SET', 'stop-writes-on-bgsave-error', 'no');
    const w = await h.wallet(1_000_000);
    const auth = { authorization: `Bearer ${w.key}` };
    assert.equal((await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth)).status, 200);
    await admin.call('ACL', 'SETUSER', 'default', '-@scripting');
    const res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth);
    assertOutageAnswer(res, 'redis', 'chat while Redis refuses scripting (NOPERM)');
    await assertHealthSeesRedisDown(h.gw.url);
  });
});

/**
 * Attack: Redis comes back requiring a password the gateway does not have (its connections are cut,
 * the reconnect gets NOAUTH). Expected: 503 naming redis, /health redis down, the 503 body carries no
 * URL or secret, and recovery by itself once the password requirement is lifted.
 */
describe('attack: Redis back with a password the gateway does not know', () => {
  let child: ChildProcess;
  let url: string;
  let h: ChatHarness;
  before(async () => {
    const port = await freePort();
    child = await redisServer(port, ['--save', '']);
    url = `redis://127.0.0.1:${port}`;
    h = await gatewayOn(url);
  });
  after(async () => {
    await h?.stop();
    if (child) await stopChild(child, 'SIGKILL');
  });

  test('NOAUTH: 503 redis, then recovery', async () => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
    const w = await h.wallet(1_000_000);
    const auth = { authorization: `Bearer ${w.key}` };
    assert.equal((await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth)).status, 200);
    const admin = new Redis(url);
    await admin.config('SET', 'requirepass', 'hunter2-secret');
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    admin.disconnect();
    await new Promise((r) => setTimeout(r, 500));
    const statuses: string[] = [];
    for (let i = 0; i < 4; i++) {
      const t = Date.now();
      const res = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth);
      statuses.push(`${res.status} ${res.body?.dependency ?? ''} ${Date.now() - t}ms ${res.text.slice(0, 120)}`);
      assert.doesNotMatch(res.text, /hunter2|redis:\/\//);
      await new Promise((r) => setTimeout(r, 300));
    }
    await assertHealthSeesRedisDown(h.gw.url);
    for (const s of statuses) assert.match(s, /^503 redis/);
    const fixer = new Redis(url, { password: 'hunter2-secret' });
    await fixer.config('SET', 'requirepass', '');
    fixer.disconnect();
    await until(async () => (await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth)).status === 200, 'recovered', 20_000);
    assert.doesNotMatch(h.gw.logs(), /hunter2/);
  });
});
