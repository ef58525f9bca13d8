import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { egressTrap } from '../support/egress-trap.ts';

/**
 * Runs the real Codex CLI (pinned in test/package.json as @openai/codex; its linux-x64 binary comes in
 * the optional dependency @openai/codex-linux-x64) as users start it: npm's `codex` launcher.
 */
const ROOT = new URL('../../', import.meta.url).pathname;
export const CODEX = [join(ROOT, 'test/node_modules/.bin/codex')].find((p) => existsSync(p));

/**
 * Settings that only keep Codex off the network on the test machine (CI has none): `analytics` posts
 * metrics to ab.chatgpt.com, and `plugins` syncs OpenAI's plugin catalogue from github.com and
 * chatgpt.com. Codex works with the gateway without them (checked by the egress trap below).
 */
export const OFFLINE_SETTINGS = '\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n';

export interface CodexRun { code: number | null; stdout: string; stderr: string; ms: number; connects: string[] }

/**
 * A fresh CODEX_HOME (and HOME) with `config` as its config.toml, kept across runs of one session
 * (`codex exec resume --last` reads the session from it).
 */
export function codexHome(config: string): string {
  const home = mkdtempSync(join(tmpdir(), 'tollgate-codex-'));
  writeFileSync(join(home, 'config.toml'), config);
  return home;
}

/**
 * `codex <args>` in `home`, with `env` added. Any attempt to reach a host other than 127.0.0.1 goes
 * to a proxy that refuses it and records the host (`connects`): Codex honours HTTPS_PROXY.
 */
export async function runCodex(home: string, args: string[], env: Record<string, string>): Promise<CodexRun> {
  const trap = await egressTrap();
  const started = performance.now();
  try {
    const child = spawn(CODEX!, args, {
      cwd: home,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, CODEX_HOME: home,
        HTTPS_PROXY: trap.url, HTTP_PROXY: trap.url, NO_PROXY: '127.0.0.1,localhost', ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    clearTimeout(timer);
    return { code, stdout, stderr, ms: performance.now() - started, connects: trap.connects };
  } finally {
    await trap.close();
  }
}
