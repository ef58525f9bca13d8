import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { addAcceptWatchers } from '../../src/http/accept-watchers.ts';
import { captureLogger } from '../support/capture-logger.ts';
import { startTestGateway } from '../support/gateway.ts';
import { okServer } from '../support/ok-server.ts';
import { until } from '../support/until.ts';

const WATCHERS = new URL('../../src/http/accept-watchers.ts', import.meta.url).pathname;

/** True once `pid` has exited (a zombie no one reaped counts as exited: it holds no descriptor). */
function exited(pid: number): boolean {
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

function holdsSocket(pid: number): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:'));
  } catch {
    return false;
  }
}

/** Whether a new listening socket can be bound on the port (nothing else holds it). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createNetServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

describe('attack: the helper that copies the listening socket, and the port over a restart', () => {
  test('a helper that exits without sending a copy: the warning the operator is told to look for is logged', async () => {
    const { server } = await okServer();
    const { logger, lines } = captureLogger();
    try {
      // A binary that runs and exits at once, like a node that cannot run the helper's script.
      const watchers = await addAcceptWatchers(server, 8, logger, { execPath: '/bin/true' });
      assert.equal(watchers.count, 0);
      assert.match(lines.join(''), /could not copy the API listening socket/);
    } finally {
      server.close();
    }
  });

  test('copies that arrive after the helper was given up on are never watched: after close the port refuses', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'review-accept-'));
    // The helper's process exits at once (the wait ends there) while a process it left behind,
    // holding the IPC channel, sends copies later: as a helper's copies still in the pipe after
    // the 5 s timeout killed it.
    const late = [
      'process.on("message", (m, handle) => setTimeout(() => {',
      'let left = m.copies; const next = (err) => { if (err || left-- === 0) return process.disconnect(); process.send("copy", handle, next); };',
      'next(); }, 300));',
    ].join(' ');
    const script = join(dir, 'leaves-a-sender.sh');
    writeFileSync(script, `#!/bin/sh\n'${process.execPath}' -e '${late}' &\nexit 0\n`, { mode: 0o755 });
    const { server, port } = await okServer();
    const { logger } = captureLogger();
    try {
      const watchers = await addAcceptWatchers(server, 4, logger, { execPath: script });
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      watchers.close();
      await new Promise((resolve) => server.close(resolve));
      assert.equal(await bindable(port), true, `port ${port} is free after close`);
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a helper that hangs: given up on after its timeout (start-up delayed at most that), killed, and the server serves', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'review-accept-'));
    const script = join(dir, 'hangs.sh');
    writeFileSync(script, '#!/bin/sh\nexec sleep 60\n', { mode: 0o755 });
    const { server, port } = await okServer();
    const { logger, lines } = captureLogger();
    try {
      const started = Date.now();
      const watchers = await addAcceptWatchers(server, 8, logger, { execPath: script });
      const waited = Date.now() - started;
      assert.equal(watchers.count, 0);
      // The documented bound (5 s), generously: a start-up never waits on the helper for long.
      assert.ok(waited < 8_000, `waited ${waited} ms for a hung helper`);
      assert.match(lines.join(''), /did not answer within 5000 ms.*could not copy the API listening socket/);
      const res = await fetch(`http://127.0.0.1:${port}/`);
      assert.equal(await res.text(), 'ok');
    } finally {
      server.close();
      server.closeAllConnections();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a port already in use: the second gateway fails to start, the first keeps serving', async () => {
    const first = await startTestGateway({ engine: 'sqlite' });
    try {
      const port = Number(new URL(first.url).port);
      await assert.rejects(startTestGateway({ engine: 'sqlite', config: { server: { port } } }), /EADDRINUSE/);
      const answers = await Promise.all(Array.from({ length: 32 }, () => fetch(`${first.url}/health`).then((r) => r.status)));
      assert.deepEqual(new Set(answers), new Set([200]));
    } finally {
      await first.stop();
    }
  });

  test('kill -9 during start-up, with the helper holding a copy: the helper leaves and the port is free', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'review-accept-'));
    // The gateway's side, frozen for good as soon as it has adopted its first copy (the moment a
    // kill -9 is most likely to leave the helper with a copy of the socket).
    const script = join(dir, 'frozen-start.mts');
    writeFileSync(
      script,
      `import { createServer } from 'node:http';
      import { Server } from 'node:net';
      import { addAcceptWatchers } from ${JSON.stringify(WATCHERS)};
      const server = createServer((_q, r) => r.end('ok'));
      await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
      const listen = Server.prototype.listen;
      Server.prototype.listen = function (...args) {
        const result = listen.apply(this, args);
        if (typeof args[0] === 'object') {
          process.stdout.write('copy ' + server.address().port + '\\n');
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
        }
        return result;
      };
      void addAcceptWatchers(server, 8, { warn() {} });`,
    );
    const gateway = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'], cwd: process.cwd() });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        gateway.stdout.on('data', (b: Buffer) => {
          out += b.toString();
          const m = /copy (\d+)/.exec(out);
          if (m) resolve(Number(m[1]));
        });
        gateway.once('exit', () => reject(new Error(`the gateway side exited early: ${out}`)));
      });
      const helpers = readFileSync(`/proc/${gateway.pid}/task/${gateway.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      assert.equal(helpers.length, 1, 'the helper is running');
      const helper = helpers[0]!;
      assert.ok(holdsSocket(helper), 'the helper holds a copy of the listening socket');
      gateway.kill('SIGKILL');
      await until(() => exited(helper), 'the helper exited after the gateway was killed', 5_000);
      assert.equal(await bindable(port), true, `port ${port} is free`);
    } finally {
      gateway.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('stop, then a new gateway on the same port at once, with a child process of the first still running', async () => {
    const first = await startTestGateway({ engine: 'sqlite' });
    const port = Number(new URL(first.url).port);
    // Spawned after the copies exist: had it inherited one, it would hold the port for 30 s.
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    let second: Awaited<ReturnType<typeof startTestGateway>> | undefined;
    try {
      await Promise.all(Array.from({ length: 32 }, () => fetch(`${first.url}/health`).then((r) => r.text())));
      await first.stop();
      second = await startTestGateway({ engine: 'sqlite', config: { server: { port } } });
      const res = await fetch(`${second.url}/health`);
      assert.equal(res.status, 200);
    } finally {
      child.kill('SIGKILL');
      await first.stop();
      await second?.stop();
    }
  });
});
