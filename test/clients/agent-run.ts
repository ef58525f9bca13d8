import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach } from 'node:test';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { egressTrap } from '../support/egress-trap.ts';

/**
 * What the coding-agent tests share: one scripted tool round trip (the fake provider asks for a tool
 * call, the agent runs it, the provider answers), its prices, the harness around it, and the agent
 * binary run as a child process that cannot leave 127.0.0.1.
 */

export const FUNDS = 2_000_000;
/** Every model here bills 1.2 and 2.4 micro-USDC a prompt and an output token (cost 1 and 2, 20% markup). */
export const PROMPT_TOKENS = 100;
export const OUTPUT_TOKENS = 20;
export const CHARGE_PER_CALL = PROMPT_TOKENS * 1.2 + OUTPUT_TOKENS * 2.4; // 168
export const TOOL_OUTPUT = 'tollgate-tool-ran';
export const FINAL_TEXT = 'The command printed tollgate-tool-ran.';

const isToolResult = (m: any) => m.role === 'tool' || (Array.isArray(m.content) && m.content.some((b: any) => b?.type === 'tool_result'));
const hasToolResult = (body: any) => (body.messages ?? []).some(isToolResult);

/** Both fakes script one turn: with tools and no tool result yet, a call of `tool` with `input`; then the final answer. */
export function toolRoundTrip(tool: string, input: Record<string, unknown>) {
  return {
    anthropic: (body: any) =>
      body.tools?.length && !hasToolResult(body)
        ? { toolCalls: [{ name: tool, input }], usage: { input_tokens: PROMPT_TOKENS, output_tokens: OUTPUT_TOKENS } }
        : { content: FINAL_TEXT, usage: { input_tokens: PROMPT_TOKENS, output_tokens: OUTPUT_TOKENS } },
    openai: (body: any) =>
      body.tools?.length && !hasToolResult(body)
        ? { toolCall: { name: tool, arguments: JSON.stringify(input) }, usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: OUTPUT_TOKENS } }
        : { content: FINAL_TEXT, usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: OUTPUT_TOKENS } },
  };
}

/**
 * The gateway with both fake providers behind it for one describe block (hooks registered here):
 * providers reset before each test, the ledger checked after each, temporary directories removed at the end.
 */
export function agentSuite(script: Parameters<typeof startAnthropicHarness>[3], config: Record<string, unknown> = {}) {
  let h: AnthropicHarness | undefined;
  const dirs: string[] = [];
  before(async () => {
    h = await startAnthropicHarness('sqlite', config, {}, script);
  });
  beforeEach(() => resetProviders(h!));
  afterEach(() => h!.gw.assertLedger());
  after(async () => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await h?.stop();
  });
  return {
    harness: () => h!,
    /** A temporary directory removed after the block. */
    tempDir(prefix: string): string {
      const dir = mkdtempSync(join(tmpdir(), prefix));
      dirs.push(dir);
      return dir;
    },
  };
}

export interface AgentRun {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
  connects: string[];
}

/**
 * `binary args` in `cwd` with exactly `env` (plus PATH). Any attempt to reach a host other than
 * 127.0.0.1 goes to a proxy that refuses it and records the host (`connects`).
 */
export async function runAgent(binary: string, args: string[], cwd: string, env: Record<string, string>): Promise<AgentRun> {
  const trap = await egressTrap();
  const started = performance.now();
  try {
    const child = spawn(binary, args, {
      cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HTTPS_PROXY: trap.url, HTTP_PROXY: trap.url, NO_PROXY: '127.0.0.1,localhost', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    clearTimeout(timer);
    return { code, stdout, stderr, ms: performance.now() - started, connects: trap.connects };
  } finally {
    await trap.close();
  }
}
