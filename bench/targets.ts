import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { stopChild, track, waitForOutput } from '../src/devchain/processes.ts';
import { freePort } from '../src/devchain/ports.ts';
import type { HeapProbe, ProbedMemory } from './heap-probe-client.ts';

/** One thing the benchmark sends requests to: its instances, their processes, the keys to send. */
export interface TargetAddress {
  name: string;
  /** One base URL (…/v1) per instance; the load generators take them in turn (request.ts). */
  baseUrls: string[];
  /** The processes whose CPU (summed) and memory are measured (the upstream itself for "direct"). */
  pids: number[];
  /** One set of request headers per wallet (its API key); the load generators take them in turn. */
  headerSets: Array<Record<string, string>>;
  /** CPU so far (µs) of the servers the target's requests use beside its own processes (PostgreSQL, Redis), when it has any. */
  serverCpuMicros?: () => number;
  /** The first process's memory after a forced full collection, when it was started with bench/heap-probe.mjs. */
  probeMemory?: () => Promise<ProbedMemory>;
}

/** A target the harness started, and so stops. */
export interface Target extends TargetAddress {
  stop(): Promise<void>;
}

const ROOT = join(import.meta.dirname, '..');
export const MODELS = ['bench-fast', 'bench-paced', 'bench-slow'];

/** Starts a Node child that prints a line matching `ready` when it listens. */
async function launch(name: string, args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; match: RegExpMatchArray }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  const match = await waitForOutput(child, ready, name, 60_000);
  // Keep draining: a process blocked on a full stdout pipe would measure as slow.
  child.stdout?.resume();
  child.stderr?.resume();
  return { child, match };
}

const stopper = (child: ChildProcess) => () => stopChild(child);

export async function startUpstream(): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const { child, match } = await launch('upstream', ['--import', 'tsx', 'bench/upstream.ts'], /"url":"(http:\/\/127\.0\.0\.1:\d+\/v1)"/);
  return { url: match[1]!, pid: child.pid!, stop: stopper(child) };
}

export function directTarget(upstream: { url: string; pid: number }): Target {
  return {
    name: 'upstream direct',
    baseUrls: [upstream.url],
    pids: [upstream.pid],
    headerSets: [{ authorization: 'Bearer sk-bench' }],
    stop: async () => undefined,
  };
}

/** With `probe`, started so that its memory can be measured after a forced collection (as Tollgate's is). */
export async function referenceProxy(upstreamUrl: string, probe?: HeapProbe): Promise<Target> {
  const args = [...(probe?.nodeArgs ?? []), '--import', 'tsx', 'bench/reference-proxy.ts', upstreamUrl];
  const { child, match } = await launch('reference proxy', args, /"url":"(http:\/\/127\.0\.0\.1:\d+)"/, probe?.env);
  return {
    ...(probe && { probeMemory: () => probe.measure(child.pid!) }),
    name: 'node:http+undici proxy',
    baseUrls: [`${match[1]}/v1`],
    pids: [child.pid!],
    headerSets: [{ authorization: 'Bearer sk-bench' }],
    stop: stopper(child),
  };
}

export async function portkey(upstreamUrl: string): Promise<Target> {
  const port = await freePort();
  const { child } = await launch(
    'Portkey gateway',
    ['--import', './bench/loopback-only.mjs', 'bench/node_modules/@portkey-ai/gateway/build/start-server.js', `--port=${port}`, '--headless'],
    /Ready for connections/,
    { NODE_ENV: 'production' },
  );
  return {
    name: 'Portkey gateway',
    baseUrls: [`http://127.0.0.1:${port}/v1`],
    pids: [child.pid!],
    headerSets: [{ authorization: 'Bearer sk-bench', 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamUrl }],
    stop: stopper(child),
  };
}
