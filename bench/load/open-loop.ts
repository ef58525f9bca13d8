import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import type { Target } from '../targets.ts';
import { chatBody, chatHeaders, chatUrl } from './request.ts';

export interface OpenLoop {
  rate: number;
  sent: number;
  failed: number;
  /** What the failures were: an HTTP status, or the client's error code (a timeout, a reset). */
  failures: Record<string, number>;
  /** Milliseconds from the scheduled send time to the full response (JSON) or first token (stream). */
  p50: number;
  p99: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * Open-loop load: requests go out on a fixed schedule whatever the target does, and each latency
 * counts from the scheduled send time, so a stalled target cannot hide its queueing (no
 * coordinated omission). For streams the figure is time to first token: the first chunk that
 * carries generated text.
 */
export async function openLoop(target: Target, o: { rate: number; seconds: number; model: string; stream: boolean }): Promise<OpenLoop> {
  const url = chatUrl(target);
  const pool = new Pool(url.origin, { connections: 2048, headersTimeout: 10_000, bodyTimeout: 10_000 });
  const body = chatBody(o.model, o.stream);
  const headers = chatHeaders(target);
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  const fail = (why: string) => void (failures[why] = (failures[why] ?? 0) + 1);
  const total = Math.round(o.rate * o.seconds);
  const interval = 1000 / o.rate;
  const inflight: Promise<void>[] = [];

  const fire = async (scheduled: number) => {
    try {
      const res = await pool.request({ method: 'POST', path: url.pathname, headers, body });
      if (res.statusCode !== 200) {
        fail(String(res.statusCode));
        await res.body.dump();
        return;
      }
      let firstToken = NaN;
      for await (const chunk of res.body) {
        if (o.stream && Number.isNaN(firstToken) && (chunk as Buffer).includes('word0')) firstToken = performance.now();
      }
      latencies.push((o.stream ? firstToken : performance.now()) - scheduled);
    } catch (err) {
      fail((err as { code?: string }).code ?? (err as Error).name);
    }
  };

  const start = performance.now() + 20;
  for (let i = 0; i < total; i++) {
    const due = start + i * interval;
    // Never send early: timers are coarse, so sleep most of the way and yield the rest.
    for (let wait = due - performance.now(); wait > 0; wait = due - performance.now()) {
      if (wait > 2) await sleep(wait - 1.5);
      else await new Promise((r) => setImmediate(r));
    }
    inflight.push(fire(due));
  }
  await Promise.all(inflight);
  await pool.close();
  const sorted = latencies.filter((l) => !Number.isNaN(l)).sort((a, b) => a - b);
  const noToken = latencies.length - sorted.length;
  if (noToken) failures['no first token'] = noToken;
  const failed = Object.values(failures).reduce((sum, n) => sum + n, 0);
  return { rate: o.rate, sent: total, failed, failures, p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}
