import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { stopChild, track, waitForOutput } from './children.ts';
import { freePort } from '../../src/devchain/ports.ts';

/**
 * A throw-away PostgreSQL server on 127.0.0.1 and a free port, run as the `postgres` user (initdb
 * refuses root). Each call to `database()` creates a fresh, empty database on it.
 */
export interface PostgresServer {
  port: number;
  database(): Promise<string>;
  stop(): Promise<void>;
  /** Shuts the server down the way a restart does (fast shutdown: sessions get 57P01), keeping its data. */
  shutDown(): Promise<void>;
  /** Starts it again on the same port and data directory. */
  startAgain(): Promise<void>;
}

function findBinDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) if (existsSync(join(root, v, 'bin', 'initdb'))) return join(root, v, 'bin');
  throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql; install them with: apt-get install -y postgresql');
}

/** Runs a command as the postgres user when we are root; setpriv execs, so the pid is the server's own. */
function asPostgres(cmd: string, args: string[]): [string, string[]] {
  if (process.getuid?.() !== 0) return [cmd, args];
  return ['setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', '--', cmd, ...args]];
}

/** `settings`: extra server settings (`-c name=value`), e.g. a preloaded library for a profile. */
export async function startPostgres(settings: Record<string, string> = {}): Promise<PostgresServer> {
  const bin = findBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-pg-'));
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const [initCmd, initArgs] = asPostgres(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  execFileSync(initCmd, initArgs, { stdio: 'pipe' });

  const port = await freePort();
  const launch = async () => {
    const [cmd, args] = asPostgres(join(bin, 'postgres'), [
      '-D',
      data,
      '-p',
      String(port),
      // No Unix socket: everything connects over TCP to 127.0.0.1, and a socket path under a long TMPDIR (npm test
      // nests one folder per run in it) can pass the 107 bytes such a path may have.
      '-c',
      'unix_socket_directories=',
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'fsync=off',
      '-c',
      'max_connections=300',
      '-c',
      'shared_buffers=64MB',
      ...Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ]);
    const started: ChildProcess = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    track(started, 'SIGQUIT');
    await waitForOutput(started, /database system is ready to accept connections/, 'postgres');
    started.stdout?.resume();
    started.stderr?.resume();
    return started;
  };
  let child = await launch();

  let counter = 0;
  const admin = `postgres://postgres@127.0.0.1:${port}/postgres`;
  return {
    port,
    async database() {
      const name = `t${process.pid}_${++counter}`;
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://postgres@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      await stopChild(child, 'SIGQUIT');
      rmSync(dir, { recursive: true, force: true });
    },
    shutDown: () => stopChild(child, 'SIGINT'),
    async startAgain() {
      child = await launch();
    },
  };
}
