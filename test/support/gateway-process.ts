import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { stopChild, track, waitForOutput } from '../../src/devchain/processes.ts';
import { TEST_ORIGIN } from './origin.ts';

/**
 * A gateway as its own process (`tollgate serve`), for what an in-process gateway cannot show:
 * being killed with SIGKILL, or several instances sharing one database.
 */
export interface GatewayProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  /** SIGKILL: no shutdown hooks, no cleanup, like a crash or an OOM kill. */
  kill(): Promise<void>;
  /** SIGTERM, then wait for it to exit. */
  stop(): Promise<void>;
}

/**
 * `nodeArgs` go to node itself, before the script (the benchmark's profile passes --cpu-prof, which NODE_OPTIONS refuses).
 * `cwd`: the checkout whose bin/tollgate.mjs runs (the benchmark's A/B runs another tree beside this one).
 */
export function startGatewayProcess(
  config: Record<string, unknown>,
  env: NodeJS.ProcessEnv = {},
  nodeArgs: string[] = [],
  cwd?: string,
): Promise<GatewayProcess> {
  return startTollgateProcess(['serve'], config, env, nodeArgs, cwd);
}

/** Any long-running tollgate command that logs its URL when it is listening. */
export async function startTollgateProcess(
  args: string[],
  config: Record<string, unknown>,
  env: NodeJS.ProcessEnv = {},
  nodeArgs: string[] = [],
  cwd?: string,
): Promise<GatewayProcess> {
  // Its own folder, removed when the process is stopped: this helper also serves the benchmark,
  // which runs outside node:test and so cannot rely on the test files' cleanup hooks.
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-process-'));
  const file = join(dir, 'tollgate.yaml');
  writeFileSync(file, stringify({ server: { host: '127.0.0.1', port: 0, publicUrl: TEST_ORIGIN }, metrics: { port: 0 }, ...config }));
  const child = spawn(process.execPath, [...nodeArgs, 'bin/tollgate.mjs', '--config', file, ...args], {
    cwd,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child);
  let output = '';
  child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (output += b.toString()));
  const m = await waitForOutput(child, /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*listening/, `tollgate ${args[0]}`, 30_000).catch((err: unknown) => {
    // A process that exits at start-up (a test of a refused start) leaves no folder behind either.
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  return {
    url: m[1]!,
    child,
    output: () => output,
    kill: () => stopChild(child, 'SIGKILL').finally(() => rmSync(dir, { recursive: true, force: true })),
    stop: () => stopChild(child, 'SIGTERM').finally(() => rmSync(dir, { recursive: true, force: true })),
  };
}
