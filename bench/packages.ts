import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The benchmark's own packages (Portkey, its Hono server, autocannon) live in bench/package.json so
 * that installing Tollgate does not download them; the first `npm run bench` installs them into
 * bench/node_modules, where the benchmark's imports find them.
 */
const BENCH = import.meta.dirname;

export function ensureBenchPackages(log: (text: string) => void): void {
  if (existsSync(join(BENCH, 'node_modules', 'autocannon')) && existsSync(join(BENCH, 'node_modules', '@portkey-ai', 'gateway'))) return;
  log("first run: installing the benchmark's own packages (Portkey, autocannon) into bench/node_modules; this takes a minute");
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: BENCH, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`installing bench/package.json failed (npm ci exit ${r.status ?? r.signal}); run "npm ci" in bench/ to see why`);
}
