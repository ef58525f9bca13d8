/*
 * How long the event loop is held, in CPU time: on the shared test machine (2 cores, other suites
 * running) the scheduler alone stretches wall time by 100 ms and more, so a turn's CPU time is what
 * says whether the gateway's own code held the loop.
 */

/** CPU time of this process since `from`, in ms. */
export const cpuSince = (from: NodeJS.CpuUsage): number => {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1000;
};

/**
 * Watches every turn of the event loop (a setImmediate ticker runs once a turn) until `stop` is
 * called, which returns the most CPU time spent in one turn, in ms.
 */
export function watchTurns(): { stop: () => number } {
  let longest = 0;
  let from = process.cpuUsage();
  let running = true;
  const tick = () => {
    longest = Math.max(longest, cpuSince(from));
    from = process.cpuUsage();
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    stop() {
      running = false;
      // The turn that is running now has had no tick after it yet.
      return Math.max(longest, cpuSince(from));
    },
  };
}
