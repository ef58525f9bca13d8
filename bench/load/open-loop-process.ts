import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { track } from '../../src/devchain/processes.ts';
import type { Target, TargetAddress } from '../targets.ts';
import { openLoop, type OpenLoop } from './open-loop.ts';

type Phase = { rate: number; seconds: number; model: string; stream: boolean };

/**
 * Runs one open-loop phase in a Node process of its own: a fresh heap with nothing else on its
 * event loop, so that the harness's garbage (autocannon's histograms, earlier phases) cannot make
 * the generator late, and its CPU is its own to measure. It prints its result as one JSON line.
 */
export function openLoopInOwnProcess(target: Target, phase: Phase): Promise<OpenLoop> {
  const address: TargetAddress = { name: target.name, baseUrls: target.baseUrls, pids: target.pids, headerSets: target.headerSets };
  const child = spawn(process.execPath, ['--import', 'tsx', import.meta.filename], {
    cwd: join(import.meta.dirname, '..', '..'),
    env: { PATH: process.env.PATH },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  track(child);
  child.stdin.end(JSON.stringify({ target: address, phase }));
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) return resolve(JSON.parse(out.trim().split('\n').at(-1)!) as OpenLoop);
      reject(new Error(`open-loop generator for ${target.name} exited (${code ?? signal}):\n${err.slice(-2000)}`));
    });
  });
}

// The child: reads {target, phase} on stdin, runs the phase, prints the result.
if (process.argv[1] && import.meta.filename === process.argv[1]) {
  let input = '';
  for await (const chunk of process.stdin) input += chunk;
  const { target, phase } = JSON.parse(input) as { target: TargetAddress; phase: Phase };
  const result = await openLoop(target, phase);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}
