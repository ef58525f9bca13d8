import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { freePort } from '../../src/devchain/ports.ts';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { stopChild, track, waitForOutput } from '../support/children.ts';
import { answersWithin, chatBody } from './support.ts';

/**
 * Attack: Redis frozen (SIGSTOP: the kernel still accepts connections, nothing answers) when the
 * gateway starts, then flapping (frozen/thawed/killed/restarted). Expected: every request is
 * answered within a few seconds (503 naming redis, never 500, never a hang), and the gateway
 * recovers by itself each time Redis answers again.
 */
describe('attack: Redis slow rather than down, and flapping', () => {
  let child: ChildProcess;
  let port: number;
  let h: ChatHarness;
  const rejections: unknown[] = [];
  const onRejection = (r: unknown) => rejections.push(r);
  const launch = async () => {
    child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] });
    track(child);
    await waitForOutput(child, /Ready to accept connections/, 'redis-server');
    child.stdout?.resume();
    child.stderr?.resume();
  };
  before(async () => {
    process.on('unhandledRejection', onRejection);
    port = await freePort();
    await launch();
    child.kill('SIGSTOP');
    h = await startChatHarness(
      'sqlite',
      { rateLimits: { backend: 'redis', redisOutage: 'closed', chat: { perMinute: 1000 }, keys: { perMinute: 1000 }, public: { perMinute: 1000 } } },
      { env: { TOLLGATE_REDIS_URL: `redis://127.0.0.1:${port}` } },
    );
  });
  after(async () => {
    process.off('unhandledRejection', onRejection);
    await h?.stop();
    if (child) {
      child.kill('SIGCONT');
      await stopChild(child, 'SIGKILL');
    }
  });

  test('bounded answers while frozen; recovery after each thaw / restart', async () => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
    // Frozen at start: the public route (rate-limited too) until a key can be made.
    let send = () => call(h.gw.url, 'GET', '/v1/models');
    const timed = async () => {
      const t = Date.now();
      const res = await send();
      return { res, ms: Date.now() - t };
    };
    const report: string[] = [];
    // Frozen at start: 5 requests in parallel, then 3 in a row.
    const parallel = await Promise.all(Array.from({ length: 5 }, timed));
    for (const { res, ms } of [...parallel, await timed(), await timed(), await timed()]) {
      report.push(`frozen-at-start ${res.status} ${res.body?.dependency ?? ''} ${ms}ms`);
      assert.equal(res.status, 503, res.text);
      assert.equal(res.body.dependency, 'redis');
      assert.ok(ms < 5_000, `a request waited ${ms} ms on a frozen Redis`);
    }
    child.kill('SIGCONT');
    report.push(`thaw 1: 200 after ${(await answersWithin(send, 200, 15_000)).tookMs}ms`);
    const w = await h.wallet(1_000_000);
    const auth = { authorization: `Bearer ${w.key}` };
    send = () => call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth);
    for (let round = 0; round < 3; round++) {
      child.kill('SIGSTOP');
      const f = await timed();
      report.push(`frozen ${round} ${f.res.status} ${f.res.body?.dependency ?? ''} ${f.ms}ms`);
      assert.equal(f.res.status, 503, f.res.text);
      assert.ok(f.ms < 5_000, `${f.ms} ms`);
      child.kill('SIGCONT');
      report.push(`thaw ${round}: 200 after ${(await answersWithin(send, 200, 15_000)).tookMs}ms`);
      await stopChild(child, 'SIGKILL');
      const d = await timed();
      report.push(`killed ${round} ${d.res.status} ${d.res.body?.dependency ?? ''} ${d.ms}ms`);
      assert.equal(d.res.status, 503, d.res.text);
      await launch();
      report.push(`restart ${round}: 200 after ${(await answersWithin(send, 200, 15_000)).tookMs}ms`);
    }
    assert.doesNotMatch(h.gw.logs(), /"statusCode":500|unhandled error/, report.join('\n'));
    assert.deepEqual(rejections, []);
    await h.gw.assertLedger();
  });
});
