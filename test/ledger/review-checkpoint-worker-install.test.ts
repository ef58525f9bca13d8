import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { openStorage } from '../../src/storage/database.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { tempDir } from '../support/sqlite-engine.ts';
import { until } from '../support/until.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Dev dependencies a production install (`npm ci --omit=dev`) lacks: the TypeScript loader and the compiler. */
const DEV_ONLY = new Set(['tsx', 'esbuild', '@esbuild', '.bin']);

/**
 * What a production install runs: dist/ (built from this checkout by the test runner), bin/ and package.json, and the
 * packages without the dev-only ones. No src/ nor scripts/, so bin/tollgate.mjs runs dist/ as is.
 */
function productionInstall(): string {
  const dir = tempDir();
  for (const part of ['dist', 'bin', 'package.json']) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
  mkdirSync(join(dir, 'node_modules'));
  for (const name of readdirSync(join(ROOT, 'node_modules'))) {
    if (!DEV_ONLY.has(name)) symlinkSync(join(ROOT, 'node_modules', name), join(dir, 'node_modules', name));
  }
  return dir;
}

describe('attack: the checkpoint worker in a production install (no tsx)', () => {
  let gw: GatewayProcess | undefined;
  after(() => gw?.stop());

  test('tollgate serve from dist/ without dev dependencies runs the pass in its worker, stores a checkpoint, and exits at SIGTERM', async () => {
    const dir = productionInstall();
    assert.ok(existsSync(join(dir, 'dist/retention/worker-entry.mjs')), 'the worker entry is in dist/');
    const tsx = spawnSync(process.execPath, ['--input-type=module', '-e', "await import('tsx/esm/api')"], { cwd: dir, env: { PATH: process.env.PATH } });
    assert.notEqual(tsx.status, 0, 'tsx cannot be loaded in this install');
    const file = join(tempDir(), 't.db');
    gw = await startGatewayProcess({ database: { url: `sqlite:${file}` }, ledger: { checkpointEverySeconds: 1 } }, {}, [], dir);
    const storage = openStorage(`sqlite:${file}`);
    try {
      const stored = async () => (await storage.db.selectFrom('ledger_checkpoints').select('at').execute()).length >= 2;
      await until(stored, 'two checkpoints stored by the gateway job', 20_000);
    } finally {
      await storage.close();
    }
    assert.doesNotMatch(gw.output(), /could not run|ERR_|Cannot find/, gw.output());
    const child = gw.child;
    await gw.stop();
    gw = undefined;
    assert.equal(child.exitCode, 0, 'a clean exit');
  });
});
