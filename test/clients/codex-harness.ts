import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runAgent, type AgentRun } from './agent-run.ts';

/**
 * Runs the real Codex CLI (pinned in test/package.json as @openai/codex; its linux-x64 binary comes in
 * the optional dependency @openai/codex-linux-x64) as users start it: npm's `codex` launcher.
 */
const ROOT = new URL('../../', import.meta.url).pathname;
export const CODEX = [join(ROOT, 'test/node_modules/.bin/codex')].find((p) => existsSync(p));

/**
 * Settings that only keep Codex off the network on the test machine (CI has none): `analytics` posts
 * metrics to ab.chatgpt.com, and `plugins` syncs OpenAI's plugin catalogue from github.com and
 * chatgpt.com. Codex works with the gateway without them (checked by runAgent's egress trap).
 */
export const OFFLINE_SETTINGS = '\n[analytics]\nenabled = false\n\n[features]\nplugins = false\n';

/** `config` as the config.toml of `home`, a CODEX_HOME kept across runs of one session (`codex exec resume --last` reads it). */
export function writeCodexConfig(home: string, config: string): string {
  writeFileSync(join(home, 'config.toml'), config);
  return home;
}

/** `codex <args>` with `home` as HOME, CODEX_HOME and working directory, and `env` added. */
export function runCodex(home: string, args: string[], env: Record<string, string>): Promise<AgentRun> {
  return runAgent(CODEX!, args, home, { HOME: home, CODEX_HOME: home, ...env });
}
