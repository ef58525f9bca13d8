import autocannon from 'autocannon';
import { cpuMicros } from '../proc.ts';
import type { Target } from '../targets.ts';
import { chatBody, chatHeaders, chatUrl } from './request.ts';

export interface Saturation {
  requestsPerSecond: number;
  completed: number;
  failed: number;
  /** The target process's CPU time per completed request. */
  cpuMicrosPerRequest: number;
}

/** Closed-loop saturation: `connections` clients each send the next request as soon as one ends. */
export async function saturate(target: Target, o: { model: string; stream: boolean; seconds: number; connections: number }): Promise<Saturation> {
  const cpuBefore = cpuMicros(target.pid);
  const result = await autocannon({
    url: chatUrl(target).href,
    method: 'POST',
    headers: chatHeaders(target),
    body: chatBody(o.model, o.stream),
    connections: o.connections,
    duration: o.seconds,
    timeout: 10,
  });
  const cpu = cpuMicros(target.pid) - cpuBefore;
  const completed = result['2xx'];
  return {
    requestsPerSecond: completed / o.seconds,
    completed,
    failed: result.non2xx + result.errors + result.timeouts,
    cpuMicrosPerRequest: completed ? cpu / completed : NaN,
  };
}
