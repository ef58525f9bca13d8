/**
 * Work that costs CPU time in proportion to what a client sent is done here, one job's slice per
 * turn of the event loop, taken in turn from every job in progress: tokenizing text (0.5 to 0.8 µs
 * a byte of random CJK, punctuation, emoji or long words, so seconds for a maximal body) in slices
 * of about SLICE_MS, and decoding and parsing a large JSON body (tens of ms at 4 MiB) in one. However
 * many such jobs are running, every other request on the instance waits at most one slice between
 * its own steps (ten bodies arriving together are parsed in ten turns, not back to back), and a
 * small count started behind a large one still finishes in its first slice or two.
 */
export const SLICE_MS = 5;

/** One job: `advance` does work until `deadline` (performance.now()) and says whether it is finished. */
export interface LaneJob {
  advance(deadline: number): boolean;
}

interface Entry {
  job: LaneJob;
  done: (error?: unknown) => void;
}

const waiting: Entry[] = [];
let scheduled = false;

function turn(): void {
  scheduled = false;
  const entry = waiting.shift();
  if (!entry) return;
  try {
    if (entry.job.advance(performance.now() + SLICE_MS)) entry.done();
    else waiting.push(entry);
  } catch (error) {
    entry.done(error);
  }
  schedule();
}

function schedule(): void {
  if (scheduled || waiting.length === 0) return;
  scheduled = true;
  // setImmediate runs after the poll phase: the I/O that arrived during a slice is served first.
  setImmediate(turn);
}

/** Runs `job` to its end in the shared lane; resolves when it is finished. */
export function runInLane(job: LaneJob): Promise<void> {
  return new Promise((resolve, reject) => {
    waiting.push({ job, done: (error) => (error === undefined ? resolve() : reject(error)) });
    schedule();
  });
}

/** How many jobs are in the lane now (running or waiting for their next slice). */
export function laneLength(): number {
  return waiting.length;
}
