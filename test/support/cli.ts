import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const BIN = join(process.cwd(), 'bin/tollgate.mjs');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `tollgate …` as a user would, to completion, with exactly the environment given (plus PATH). */
export async function runTollgate(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH, ...env }, timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
