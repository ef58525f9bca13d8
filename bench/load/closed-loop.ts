import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { cpuMicrosOf, machineBusyMicros } from '../proc.ts';
import type { Target } from '../targets.ts';
import { chatBody, chatHeaderSets, chatUrls } from './request.ts';

export interface Saturation {
  requestsPerSecond: number;
  completed: number;
  failed: number;
  /** The target's CPU time (every instance's, summed) per completed request. */
  cpuMicrosPerRequest: number;
  /**
   * Cores the whole machine kept busy over the phase (everything on it: the target, the load
   * generator, the upstream, the database): near all of them, a second instance has none to use.
   */
  machineBusyCores: number;
  /** The target's database server (and Redis) per completed request, when the target names one (serverCpuMicros). */
  serverCpuMicrosPerRequest?: number;
}

/**
 * Closed-loop saturation: `connections` clients each send the next request as soon as one ends.
 * The connections are dealt out over the target's instances in turn (autocannon does that with
 * several URLs), and each connection takes the wallets in turn, starting one further along than
 * the connection before it, so that the requests in flight at any moment carry different wallets.
 */
export async function saturate(target: Target, o: { model: string; stream: boolean; seconds: number; connections: number }): Promise<Saturation> {
  const body = chatBody(o.model, o.stream);
  const requests = chatHeaderSets(target).map((headers) => ({ method: 'POST', headers, body }));
  let clients = 0;
  const cpuBefore = cpuMicrosOf(target.pids);
  const serverBefore = target.serverCpuMicros?.() ?? NaN;
  const machineBefore = machineBusyMicros();
  const wallStart = performance.now();
  const result = await autocannon({
    url: chatUrls(target).map((u) => u.href),
    method: 'POST',
    headers: requests[0]!.headers,
    body,
    connections: o.connections,
    duration: o.seconds,
    timeout: 10,
    setupClient: (client) => {
      const start = clients++ % requests.length;
      if (requests.length > 1) client.setRequests([...requests.slice(start), ...requests.slice(0, start)]);
    },
  });
  const cpu = cpuMicrosOf(target.pids) - cpuBefore;
  const server = (target.serverCpuMicros?.() ?? NaN) - serverBefore;
  const machineBusyCores = (machineBusyMicros() - machineBefore) / ((performance.now() - wallStart) * 1000);
  const completed = result['2xx'];
  return {
    requestsPerSecond: completed / o.seconds,
    completed,
    failed: result.non2xx + result.errors + result.timeouts,
    cpuMicrosPerRequest: completed ? cpu / completed : NaN,
    machineBusyCores,
    ...(target.serverCpuMicros && completed ? { serverCpuMicrosPerRequest: server / completed } : {}),
  };
}
