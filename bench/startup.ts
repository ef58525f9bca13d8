import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startGatewayProcess } from '../test/support/gateway-process.ts';
import { rssBytes } from './proc.ts';
import { startupLines, type Startup } from './report-sections.ts';
import { median } from './median.ts';

/**
 * How fast the shipped command starts and how much an idle gateway holds, as an operator meets
 * them (the figures and their lines are in report-sections.ts).
 */

const execFileAsync = promisify(execFile);
const BIN = join(import.meta.dirname, '..', 'bin', 'tollgate.mjs');
const IDLE_MS = 2000;

async function helpOnce(): Promise<number> {
  const t0 = performance.now();
  await execFileAsync(process.execPath, [BIN, '--help']);
  return performance.now() - t0;
}

async function healthOnce(dir: string, run: number): Promise<{ ms: number; rss: number }> {
  const t0 = performance.now();
  const gateway = await startGatewayProcess({ database: { url: `sqlite:${join(dir, `startup-${run}.db`)}` } });
  try {
    for (;;) {
      const res = await fetch(`${gateway.url}/health`).catch(() => null);
      await res?.arrayBuffer();
      if (res?.status === 200) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const ms = performance.now() - t0;
    await new Promise((r) => setTimeout(r, IDLE_MS));
    return { ms, rss: rssBytes(gateway.child.pid!) };
  } finally {
    await gateway.stop();
  }
}

export async function measureStartup(dir: string, runs = 5): Promise<Startup> {
  const help: number[] = [];
  const health: number[] = [];
  const rss: number[] = [];
  for (let i = 0; i < runs; i++) {
    help.push(await helpOnce());
    const h = await healthOnce(dir, i);
    health.push(h.ms);
    rss.push(h.rss);
  }
  return { helpMs: median(help), healthMs: median(health), idleRssBytes: median(rss), runs };
}

// `node --import tsx bench/startup.ts`: only this section, without the load phases.
if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-startup-'));
  try {
    process.stdout.write(`${startupLines(await measureStartup(dir, Number(process.argv[2] ?? 5))).join('\n')}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
