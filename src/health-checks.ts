/**
 * /health's view of the dependencies. Each probe has a short timeout and all run at once, so one
 * dead RPC cannot slow the answer; the result is shared for a moment, so a load balancer polling
 * every instance (or anyone, /health is public) costs one probe round, not one per call.
 */
export interface DependencyProbe {
  /** Shown in the report: "database", "redis", "rpc:8453". */
  name: string;
  /** A required dependency being down makes the instance unhealthy (503, drained). */
  required: boolean;
  /** Resolves when the dependency answered; anything else counts as down. */
  check(): Promise<unknown>;
}

export type CheckStatus = 'ok' | 'down';

export interface HealthReport {
  healthy: boolean;
  checks: Record<string, CheckStatus>;
  /** The required dependencies that are down. */
  down: string[];
}

export interface HealthMonitor {
  report(): Promise<HealthReport>;
}

export const PROBE_TIMEOUT_MS = 1_000;
export const REPORT_CACHE_MS = 1_000;

export function createHealthMonitor(
  probes: DependencyProbe[],
  /** Called when a dependency goes down or comes back (not on every probe), for the log. */
  onChange: (name: string, status: CheckStatus, err?: unknown) => void,
  opts: { timeoutMs?: number; cacheMs?: number } = {},
): HealthMonitor {
  const timeoutMs = opts.timeoutMs ?? PROBE_TIMEOUT_MS;
  const cacheMs = opts.cacheMs ?? REPORT_CACHE_MS;
  let cached: { at: number; report: Promise<HealthReport> } | null = null;
  const last = new Map<string, CheckStatus>();
  const record = (name: string, status: CheckStatus, err?: unknown) => {
    if ((last.get(name) ?? 'ok') !== status) onChange(name, status, err);
    last.set(name, status);
    return status;
  };

  async function probeAll(): Promise<HealthReport> {
    const results = await Promise.all(
      probes.map(async (p) => {
        try {
          await withTimeout(p.check(), timeoutMs);
          return record(p.name, 'ok');
        } catch (err) {
          return record(p.name, 'down', err);
        }
      }),
    );
    const checks: Record<string, CheckStatus> = {};
    probes.forEach((p, i) => (checks[p.name] = results[i]!));
    const down = probes.filter((p, i) => p.required && results[i] === 'down').map((p) => p.name);
    return { healthy: down.length === 0, checks, down };
  }

  return {
    report() {
      // Monotonic time: tests move the service clock, and the cache must not care.
      const now = performance.now();
      if (!cached || now - cached.at >= cacheMs) {
        const report = probeAll();
        cached = { at: now, report };
        // The cache age counts from the answer, so a slow round is still reused for cacheMs.
        void report.then(() => cached && cached.report === report && (cached.at = performance.now()));
      }
      return cached.report;
    },
  };
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  work.catch(() => undefined); // a late failure after the timeout is not an unhandled rejection
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
