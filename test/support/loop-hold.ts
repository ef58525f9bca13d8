/*
 * How long the event loop is held, in CPU time: on the shared test machine (2 cores, other suites
 * running) the scheduler alone stretches wall time by 100 ms and more, so a turn's CPU time is what
 * says whether the gateway's own code held the loop.
 */
import { readFileSync } from 'node:fs';

/** CPU time of this process since `from`, in ms. */
export const cpuSince = (from: NodeJS.CpuUsage): number => {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1000;
};

/**
 * CPU time this thread alone has run, in ms (Linux's per-thread scheduler statistics): with a
 * worker thread busy beside the loop, the process's CPU time counts the worker's too.
 */
export const threadCpuMs = (): number => Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e6;

const processCpuMs = (): number => cpuSince({ user: 0, system: 0 });

/**
 * Watches every turn of the event loop (a setImmediate ticker runs once a turn) until `stop` is
 * called, which returns the most CPU time spent in one turn, in ms: the process's by default, or
 * the clock given (threadCpuMs).
 */
export function watchTurns(clock: () => number = processCpuMs): { stop: () => number } {
  let longest = 0;
  let from = clock();
  let running = true;
  const tick = () => {
    longest = Math.max(longest, clock() - from);
    from = clock();
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    stop() {
      running = false;
      // The turn that is running now has had no tick after it yet.
      return Math.max(longest, clock() - from);
    },
  };
}
