import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { freePort } from '../../src/devchain/ports.ts';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { stopChild, track, waitForOutput } from '../support/children.ts';
import { until } from '../support/until.ts';
import { chatBody } from './support.ts';

/** What ten requests in a row would take at least if each waited out the 1 s Redis command timeout. */
const TEN_WAITS_MS = 10_000;

/**
 * Attack: Redis frozen (SIGSTOP: connections accepted, nothing answered), with the default
 * `rateLimits.redisOutage: local`. Each command to it waits out the 1 s command timeout; once one
 * request has found Redis down, no request may wait on it again (they are decided locally, and a
 * single probe asks Redis), so the instance serves at its usual pace. Thawed: shared limits again.
 */
describe('attack: Redis frozen with redisOutage: local', () => {
  let child: ChildProcess;
  let h: ChatHarness;
  before(async () => {
    const port = await freePort();
    child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
    track(child);
    await waitForOutput(child, /Ready to accept connections/, 'redis-server');
    child.stdout?.resume();
    child.stderr?.resume();
    h = await startChatHarness(
      'sqlite',
      { rateLimits: { backend: 'redis', chat: { perMinute: 1000 }, keys: { perMinute: 1000 }, public: { perMinute: 1000 } } },
      { env: { TOLLGATE_REDIS_URL: `redis://127.0.0.1:${port}` } },
    );
  });
  after(async () => {
    await h?.stop();
    if (child) {
      child.kill('SIGCONT');
      await stopChild(child, 'SIGKILL');
    }
  });

  test('the first request finds it frozen; the next ten do not wait on it; thawed, the shared limiter decides again', async () => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
    const w = await h.wallet(1_000_000);
    const chat = () => call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${w.key}` });
    assert.equal((await chat()).status, 200);

    child.kill('SIGSTOP');
    const first = await chat();
    assert.equal(first.status, 200, first.text);
    assert.ok(h.gw.services.rateLimitsDegraded());
    const started = Date.now();
    for (let i = 0; i < 10; i++) assert.equal((await chat()).status, 200);
    const tookMs = Date.now() - started;
    assert.ok(tookMs < TEN_WAITS_MS / 2, `ten requests took ${tookMs} ms: they waited on the frozen Redis`);
    const health = await call(h.gw.url, 'GET', '/health');
    assert.equal(health.status, 200, health.text);
    assert.equal(health.body.rateLimits, 'local');

    child.kill('SIGCONT');
    await until(() => !h.gw.services.rateLimitsDegraded(), 'back on the shared limiter', 15_000);
    assert.equal((await chat()).headers.get('x-ratelimit-limit'), '1000');
    assert.doesNotMatch(h.gw.logs(), /"statusCode":5\d\d|unhandled/);
    await h.gw.assertLedger();
  });
});
