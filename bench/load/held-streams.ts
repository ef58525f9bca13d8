import { Pool } from 'undici';
import { rssBytes } from '../proc.ts';
import type { Target } from '../targets.ts';
import { chatBody, chatHeaderSets, chatUrls } from './request.ts';
import { median } from '../median.ts';

export interface HeldStreams {
  wanted: number;
  /** Streams that had delivered their first token when memory was sampled. */
  open: number;
  rssIdleBytes: number;
  /** RSS sampled every 500 ms while every stream was held open. */
  rssSamplesBytes: number[];
  /** The first sample, taken the moment the last stream opened (the figure reported before 2026-11-22). */
  rssAtOpenBytes: number;
  /** The median sample. */
  rssLoadedBytes: number;
  bytesPerStream: number;
  /** What `whileHeld` returned, called once every stream was open and RSS sampled, before any stream ended. */
  held?: unknown;
  /**
   * For a target that can be probed (probeMemory): V8's heap used plus the memory outside it that
   * V8 knows of (external: buffers), after a forced full collection, idle and with every stream
   * held. The RSS samples are then taken after that collection too, without the opening burst's garbage.
   */
  heapIdleBytes?: number;
  heapLoadedBytes?: number;
  /** The same phase with fewer streams, run just before (the benchmark's slope between two sizes). */
  smaller?: HeldStreams;
}

/**
 * Bytes per held stream: between the two sizes when the phase ran at two (what one more stream
 * costs), else over the idle figure. `heap`: heap used plus external after a forced collection.
 */
export function perHeldStream(h: HeldStreams, what: 'rss' | 'heap'): number {
  const loaded = (x: HeldStreams) => (what === 'rss' ? x.rssLoadedBytes : (x.heapLoadedBytes ?? NaN));
  const idle = what === 'rss' ? h.rssIdleBytes : (h.heapIdleBytes ?? NaN);
  const s = h.smaller;
  if (s && h.open > s.open) return (loaded(h) - loaded(s)) / (h.open - s.open);
  return h.open ? (loaded(h) - idle) / h.open : NaN;
}

const SAMPLES = 9;
const SAMPLE_EVERY_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Opens `count` slow streams at once (a chunk every 500 ms, about 11 s each) and waits until every
 * one has delivered its first token. Then, while they are all still open, samples the target's
 * resident memory every 500 ms for 4 s and takes the median. One sample at the moment the last
 * stream opened lands on the garbage of the opening burst (2,000 requests in about a second) or
 * just after a collection of it, by chance; it swung from 19 to 48 KB per stream between runs.
 */
export async function holdStreams(
  target: Target,
  count: number,
  o: { maxWaitMs?: number; whileHeld?: () => Promise<unknown>; body?: string } = {},
): Promise<HeldStreams> {
  const maxWaitMs = o.maxWaitMs ?? 30_000;
  // Memory is a one-instance, one-wallet measure: the first of each.
  const url = chatUrls(target)[0]!;
  const pid = target.pids[0]!;
  const pool = new Pool(url.origin, { connections: count, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const body = o.body ?? chatBody('bench-slow', true);
  const headers = chatHeaderSets(target)[0]!;
  const collected = async () => {
    const m = await target.probeMemory?.();
    return m && m.heapUsed + m.external;
  };
  const heapIdleBytes = await collected();
  const rssIdleBytes = rssBytes(pid);
  let open = 0;
  let allOpen: () => void = () => undefined;
  const everyoneOpen = new Promise<void>((r) => (allOpen = r));

  const streams = Array.from({ length: count }, async () => {
    try {
      const res = await pool.request({ method: 'POST', path: url.pathname, headers, body });
      let counted = false;
      for await (const chunk of res.body) {
        if (!counted && (chunk as Buffer).includes('word0')) {
          counted = true;
          if (++open === count) allOpen();
        }
      }
    } catch {
      // A stream the target could not hold simply does not count as open.
    }
  });
  await Promise.race([everyoneOpen, sleep(maxWaitMs)]);
  const openAtSample = open;
  const heapLoadedBytes = await collected();
  const rssSamplesBytes: number[] = [];
  // The streams last about 11 s from the first token, so all are still open at the last sample.
  for (let i = 0; i < SAMPLES; i++) {
    if (i > 0) await sleep(SAMPLE_EVERY_MS);
    rssSamplesBytes.push(rssBytes(pid));
  }
  const rssLoadedBytes = median(rssSamplesBytes);
  const held = await o.whileHeld?.();
  await Promise.race([Promise.all(streams), sleep(60_000)]);
  await pool.destroy();
  const bytesPerStream = openAtSample ? (rssLoadedBytes - rssIdleBytes) / openAtSample : NaN;
  return {
    wanted: count,
    open: openAtSample,
    rssIdleBytes,
    rssSamplesBytes,
    rssAtOpenBytes: rssSamplesBytes[0]!,
    rssLoadedBytes,
    bytesPerStream,
    held,
    heapIdleBytes,
    heapLoadedBytes,
  };
}
