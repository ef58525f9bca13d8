import { Pool } from 'undici';
import { rssBytes } from '../proc.ts';
import type { Target } from '../targets.ts';
import { chatBody, chatHeaders, chatUrl } from './request.ts';

export interface HeldStreams {
  wanted: number;
  /** Streams that had delivered their first token when memory was sampled. */
  open: number;
  rssIdleBytes: number;
  rssLoadedBytes: number;
  bytesPerStream: number;
}

/**
 * Opens `count` slow streams at once (a chunk every 500 ms, about 11 s each), waits until every one
 * has delivered its first token, then samples the target's resident memory. Then lets them finish.
 */
export async function holdStreams(target: Target, count: number, maxWaitMs = 30_000): Promise<HeldStreams> {
  const url = chatUrl(target);
  const pool = new Pool(url.origin, { connections: count, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const body = chatBody('bench-slow', true);
  const headers = chatHeaders(target);
  const rssIdleBytes = rssBytes(target.pid);
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
  await Promise.race([everyoneOpen, new Promise((r) => setTimeout(r, maxWaitMs))]);
  const rssLoadedBytes = rssBytes(target.pid);
  const openAtSample = open;
  await Promise.race([Promise.all(streams), new Promise((r) => setTimeout(r, 60_000))]);
  await pool.destroy();
  return { wanted: count, open: openAtSample, rssIdleBytes, rssLoadedBytes, bytesPerStream: openAtSample ? (rssLoadedBytes - rssIdleBytes) / openAtSample : NaN };
}
