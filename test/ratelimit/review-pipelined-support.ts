import { spawn, type ChildProcess } from 'node:child_process';
import type { RateDecision } from '../../src/ratelimit/limiter.ts';
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

export type Outcome = 'allowed' | 'denied' | 'outage' | 'bug';

/** What came of one hit: a decision, an outage (the local share or a 503), or an error that stays a 500. */
export function outcomeOf(pending: Promise<RateDecision>): Promise<Outcome> {
  return pending.then(
    (d) => (d.allowed ? 'allowed' : 'denied'),
    (err: Error) => (err.name === 'DependencyUnavailable' ? 'outage' : 'bug'),
  );
}
