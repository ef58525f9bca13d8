import { spawn, type ChildProcess } from 'node:child_process';
import { stopChild, track, waitForOutput } from './children.ts';
import { freePort } from '../../src/devchain/ports.ts';

export interface RedisServer {
  url: string;
  stop(): Promise<void>;
  /** Kills the server (an outage); the port stays reserved for `startAgain`. */
  kill(): Promise<void>;
  /** Starts a new, empty server on the same port (Redis restarted without persistence). */
  startAgain(): Promise<void>;
}

/**
 * A throw-away Redis on 127.0.0.1 and a free port, with no persistence. `down`: the port is chosen
 * but nothing listens on it until `startAgain` (a gateway that starts before its Redis).
 */
export async function startRedis(opts: { down?: boolean } = {}): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | null = opts.down ? null : await launch(port);
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: async () => void (child && (await stopChild(child, 'SIGTERM'))),
    kill: async () => void (child && (await stopChild(child, 'SIGKILL'))),
    async startAgain() {
      child = await launch(port);
    },
  };
}

async function launch(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--protected-mode', 'yes'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.on('error', () => undefined);
  track(child);
  await waitForOutput(child, /Ready to accept connections/, 'redis-server (install it with: apt-get install redis-server)');
  child.stdout?.resume();
  child.stderr?.resume();
  return child;
}
