import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

/** An HTTP proxy that answers every request and CONNECT with 403 and records where it was meant to go. */
async function egressTrap(): Promise<{ url: string; connects: string[]; close(): Promise<void> }> {
  const connects: string[] = [];
  const server: Server = createServer((req, res) => {
    connects.push(`${req.method} ${req.url}`);
    res.writeHead(403).end();
  });
  server.on('connect', (req, socket) => {
    connects.push(`CONNECT ${req.url}`);
    socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    connects,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}
