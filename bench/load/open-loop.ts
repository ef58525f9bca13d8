import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { cpuMicrosOf, machineBusyMicros } from '../proc.ts';
import type { TargetAddress } from '../targets.ts';
import { chatBody, chatHeaderSets, chatUrls, nthRequest } from './request.ts';

export interface OpenLoop {
  rate: number;
  sent: number;
  failed: number;
  /** What the failures were: an HTTP status, or the client's error code (a timeout, a reset). */
  failures: Record<string, number>;
  /** Milliseconds from the scheduled send time to the full response (JSON) or first token (stream). */
  p50: number;
  p99: number;
  /** The rest of the distribution from the schedule (absent in results from before 2026-11-29). */
  p90?: number;
  p999?: number;
  max?: number;
  /** The same, counted from when the generator actually sent: a gap to p50/p99 is the generator's own lateness. */
  p50FromSend: number;
  p99FromSend: number;
  /** Requests per second the generator actually sent, first send to last. */
  achievedRate: number;
  /** How far behind its schedule the generator sent, in milliseconds. */
  sendLagP50: number;
  sendLagP99: number;
  /** The generator's own CPU over the phase, as a share of one core. */
  generatorCpuShare: number;
  /** False when the generator fell short: it sent below the asked rate, or late (see keptSchedule). */
  keptSchedule: boolean;
  /**
   * The slowest 1% of the phase, each as when it was scheduled (ms from the phase's start) and how
   * long it took (ms, from that time): whether the tail is one stall or spread over the phase.
   */
  slowest: Array<{
    atMs: number;
    ms: number;
    /** The rest: ms from the schedule to the send, to undici writing it on a socket, to the response's headers; and
     * whether that socket was new (absent in results from before 2026-11-29's afternoon). */
    sendLagMs?: number;
    onSocketMs?: number;
    newSocket?: boolean;
    headersMs?: number;
  }>;
  /** When the schedule started (atMs 0), in epoch milliseconds: lines the slowest up with a gateway's own record. */
  startEpochMs?: number;
  /** The target's CPU over the phase (every instance summed), as a share of one core. */
  targetCpuShare: number;
  /** Cores the whole machine kept busy over the phase (everything on it, this benchmark or not). */
  machineBusyCores: number;
}

/** The generator kept its schedule if it sent at least this share of the asked rate… */
const MIN_RATE_SHARE = 0.98;
/**
 * …and its 99th-percentile lateness stayed under this. Node's timers wake at millisecond
 * granularity, so up to about 1 ms late is the generator's normal; it is the same for every target,
 * so it cancels out of the "added" figures, which subtract the upstream direct or the proxy.
 */
const MAX_SEND_LAG_P99_MS = 2;

/** Requests sent to each instance before the schedule starts, not counted (see openLoop). */
const WARM_UP_REQUESTS = 5;

/** How long the phase's own rate is sent before the clock starts, not counted (see openLoop). */
const WARM_UP_AT_RATE_MS = 300;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Calls `send(i, scheduled)` for i = 0 … count − 1 at `start + i × interval`. Sleeps on a timer and,
 * on each wake-up, sends every request that has come due, each with its own scheduled time. Never
 * busy-waits: the loop this replaces yielded with setImmediate for the last 1.5 ms before each
 * send, which at 1,000 req/s (a 1 ms interval) was all the time, and took 0.75–0.95 of a core from
 * a 2-core machine that the target and the upstream share.
 */
async function onSchedule(start: number, interval: number, count: number, send: (i: number, scheduled: number) => void): Promise<void> {
  for (let i = 0; i < count; ) {
    const now = performance.now();
    for (; i < count && start + i * interval <= now; i++) send(i, start + i * interval);
    if (i < count) await sleep(Math.max(0, start + i * interval - performance.now()));
  }
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Whether a generator that sent at `achievedRate`, this late at the 99th percentile, kept an open loop's schedule. */
export function keptSchedule(o: { rate: number; achievedRate: number; sendLagP99: number }): boolean {
  return o.achievedRate >= MIN_RATE_SHARE * o.rate && o.sendLagP99 <= MAX_SEND_LAG_P99_MS;
}

/**
 * Open-loop load: requests go out on a fixed schedule whatever the target does, and each latency
 * counts from the scheduled send time, so a stalled target cannot hide its queueing (no
 * coordinated omission). For streams the figure is time to first token: the first chunk that
 * carries generated text. A generator that cannot keep its own schedule (its process starved of
 * CPU, or saturated) would charge its lateness to the target: the send times are recorded too, and
 * the result says whether the schedule was kept, with the generator's and the target's CPU. Requests take the target's instances and wallets
 * in turn (nthRequest). Run it in its own process (open-loop-process.ts), away from the harness.
 */
export async function openLoop(target: TargetAddress, o: { rate: number; seconds: number; model: string; stream: boolean }): Promise<OpenLoop> {
  const urls = chatUrls(target);
  const pools = urls.map((url) => new Pool(url.origin, { connections: 2048, headersTimeout: 10_000, bodyTimeout: 10_000 }));
  const body = chatBody(o.model, o.stream);
  const headerSets = chatHeaderSets(target);
  const fromSchedule: number[] = [];
  const scheduledAt: number[] = [];
  // Per request, from its scheduled send: when the generator sent it and when the response's headers
  // arrived (for a stream, the SSE headers the gateway writes before its upstream call), so the
  // slowest 1% can be split into the generator's lateness, the wait for headers, and the rest.
  const sendLagOf: number[] = [];
  const headersAt: number[] = [];
  // When undici wrote each request's headers to a socket, and whether that socket was new: a request
  // the pool had to open a connection for waits for the connect (undici's own channels, by request).
  const indexOfRequest = new WeakMap<object, number>();
  const onSocketAt = new Map<number, { at: number; newSocket: boolean }>();
  const socketsSeen = new WeakSet<object>();
  let creating = -1;
  const onCreate = (m: unknown) => {
    if (creating >= 0) indexOfRequest.set((m as { request: object }).request, creating);
  };
  const onSendHeaders = (m: unknown) => {
    const { request, socket } = m as { request: object; socket: object };
    const i = indexOfRequest.get(request);
    const newSocket = !socketsSeen.has(socket);
    socketsSeen.add(socket);
    if (i !== undefined) onSocketAt.set(i, { at: performance.now(), newSocket });
  };
  subscribe('undici:request:create', onCreate);
  subscribe('undici:client:sendHeaders', onSendHeaders);
  const scheduledOf: number[] = [];
  const indexOf: number[] = [];
  const fromSend: number[] = [];
  const sendLags: number[] = [];
  const failures: Record<string, number> = {};
  const fail = (why: string) => void (failures[why] = (failures[why] ?? 0) + 1);
  const total = Math.round(o.rate * o.seconds);
  const interval = 1000 / o.rate;
  const inflight: Promise<void>[] = [];
  let firstSend = NaN;
  let lastSend = NaN;

  const fire = async (i: number, scheduled: number) => {
    const sent = performance.now();
    if (i === 0) firstSend = sent;
    lastSend = sent;
    sendLags.push(sent - scheduled);
    const { instance, wallet } = nthRequest(i, urls.length, headerSets.length);
    try {
      creating = i;
      const pending = pools[instance]!.request({ method: 'POST', path: urls[instance]!.pathname, headers: headerSets[wallet]!, body });
      creating = -1;
      const res = await pending;
      const headersArrived = performance.now();
      if (res.statusCode !== 200) {
        fail(String(res.statusCode));
        await res.body.dump();
        return;
      }
      let firstToken = NaN;
      for await (const chunk of res.body) {
        if (o.stream && Number.isNaN(firstToken) && (chunk as Buffer).includes('word0')) firstToken = performance.now();
      }
      const end = o.stream ? firstToken : performance.now();
      if (Number.isNaN(end)) return fail('no first token');
      fromSchedule.push(end - scheduled);
      scheduledAt.push(scheduled);
      fromSend.push(end - sent);
      sendLagOf.push(sent - scheduled);
      headersAt.push(headersArrived - scheduled);
      indexOf.push(i);
      scheduledOf.push(scheduled);
    } catch (err) {
      fail((err as { code?: string }).code ?? (err as Error).name);
    }
  };

  // Warm up before the clock starts: the first request through a fresh process compiles undici's
  // path and opens a connection, which made the first sends of a phase tens of milliseconds late.
  const warmUp = (i: number) => {
    const { instance, wallet } = nthRequest(i, urls.length, headerSets.length);
    return pools[instance]!.request({ method: 'POST', path: urls[instance]!.pathname, headers: headerSets[wallet]!, body }).then(
      (res) => res.body.dump(),
      () => undefined,
    );
  };
  for (let i = 0; i < WARM_UP_REQUESTS; i++) await Promise.all(pools.map((_, p) => warmUp(i * pools.length + p)));
  // Then the phase's own rate for a moment, not counted either: in the first 100-200 ms of a
  // phase the generator's fresh process is still compiling its send path on the cores the target
  // needs, and the slowest 1% of many phases sat there (bench/README.md, "The tail at 200 req/s").
  const warming: Promise<void>[] = [];
  await onSchedule(performance.now(), interval, Math.round((o.rate * WARM_UP_AT_RATE_MS) / 1000), (i) => warming.push(warmUp(i)));
  await Promise.all(warming);
  const cpuBefore = process.cpuUsage();
  const targetCpuBefore = cpuMicrosOf(target.pids);
  const machineBefore = machineBusyMicros();
  const wallStart = performance.now();
  const start = wallStart + 20;
  await onSchedule(start, interval, total, (i, scheduled) => inflight.push(fire(i, scheduled)));
  await Promise.all(inflight);
  unsubscribe('undici:request:create', onCreate);
  unsubscribe('undici:client:sendHeaders', onSendHeaders);
  const cpu = process.cpuUsage(cpuBefore);
  const wallMicros = (performance.now() - wallStart) * 1000;
  const generatorCpuShare = (cpu.user + cpu.system) / wallMicros;
  const targetCpuShare = (cpuMicrosOf(target.pids) - targetCpuBefore) / wallMicros;
  const machineBusyCores = (machineBusyMicros() - machineBefore) / wallMicros;
  await Promise.all(pools.map((p) => p.close()));
  const sort = (xs: number[]) => [...xs].sort((a, b) => a - b);
  const [lat, latSend, lags] = [sort(fromSchedule), sort(fromSend), sort(sendLags)];
  const slowest = fromSchedule
    .map((ms, n) => {
      const onSocket = onSocketAt.get(indexOf[n]!);
      const onSocketMs = onSocket ? onSocket.at - scheduledOf[n]! : Number.NaN;
      return { atMs: scheduledAt[n]! - start, ms, sendLagMs: sendLagOf[n]!, onSocketMs, newSocket: onSocket?.newSocket ?? false, headersMs: headersAt[n]! };
    })
    .sort((a, b) => b.ms - a.ms)
    .slice(0, Math.ceil(fromSchedule.length / 100));
  // The rate over the sending span: n requests span n − 1 intervals.
  const achievedRate = total > 1 ? ((total - 1) * 1000) / (lastSend - firstSend) : o.rate;
  const sendLagP99 = percentile(lags, 99);
  return {
    rate: o.rate,
    sent: total,
    failed: Object.values(failures).reduce((sum, n) => sum + n, 0),
    failures,
    p50: percentile(lat, 50),
    p90: percentile(lat, 90),
    p99: percentile(lat, 99),
    p999: percentile(lat, 99.9),
    max: lat.at(-1) ?? NaN,
    p50FromSend: percentile(latSend, 50),
    p99FromSend: percentile(latSend, 99),
    slowest,
    startEpochMs: performance.timeOrigin + start,
    achievedRate,
    sendLagP50: percentile(lags, 50),
    sendLagP99,
    generatorCpuShare,
    targetCpuShare,
    machineBusyCores,
    keptSchedule: keptSchedule({ rate: o.rate, achievedRate, sendLagP99 }),
  };
}
