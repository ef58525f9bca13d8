import { spawn, type ChildProcess } from 'node:child_process';
import { track, waitForOutput } from '../support/children.ts';

/**
 * A redis-server whose process the test holds: to freeze it (SIGSTOP: connections accepted, nothing
 * answered), kill it, or start it with settings Redis refuses to change at run time (`--dir`).
 */
export async function launchRedis(port: number, args: string[] = []): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.on('error', () => undefined);
  track(child);
  await waitForOutput(child, /Ready to accept connections/, 'redis-server');
  child.stdout?.resume();
  child.stderr?.resume();
  return child;
}
