import type { ChildProcess } from 'node:child_process';

/**
 * Every server a test or the demo starts is registered here so that it dies with the test process, even when a
 * test throws before its own cleanup runs.
 */
const live = new Map<ChildProcess, { killSignal: NodeJS.Signals; afterKill?: () => void }>();
let hooked = false;

/**
 * `afterKill` runs, synchronously, when the test process exits with the child still alive: for what the child leaves
 * on disk that only its owner knows to remove (anvil's state folder).
 */
export function track(child: ChildProcess, killSignal: NodeJS.Signals = 'SIGKILL', afterKill?: () => void): void {
  live.set(child, { killSignal, afterKill });
  child.once('exit', () => live.delete(child));
  if (!hooked) {
    hooked = true;
    process.once('exit', () => {
      // Every child is signalled before any clean-up runs, so a clean-up that throws leaves no server running.
      const running = [...live];
      for (const [c, how] of running) c.kill(how.killSignal);
      for (const [, how] of running) {
        try {
          how.afterKill?.();
        } catch {
          // The process is exiting: what could not be removed stays, and the others are still tried.
        }
      }
    });
  }
}

/** Sends `signal` to the child, unless it already exited, and resolves once it has. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
}

/** Resolves when the child prints a line matching `pattern`; rejects if it exits first or times out. */
export function waitForOutput(child: ChildProcess, pattern: RegExp, what: string, timeoutMs = 20_000): Promise<RegExpMatchArray> {
  return new Promise((resolveMatch, reject) => {
    let seen = '';
    const onData = (buf: Buffer) => {
      seen += buf.toString();
      const m = seen.match(pattern);
      if (m) finish(() => resolveMatch(m));
    };
    const onExit = (code: number | null) => finish(() => reject(new Error(`${what} exited (${code}) before it was ready:\n${seen.slice(-2000)}`)));
    const timer = setTimeout(() => finish(() => reject(new Error(`${what} was not ready after ${timeoutMs} ms:\n${seen.slice(-2000)}`))), timeoutMs);
    function finish(fn: () => void) {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      fn();
    }
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
  });
}
