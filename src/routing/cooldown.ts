/**
 * Which deployments are cooling down: a deployment that failed `failures` times within `windowMs`
 * goes after the others for `cooldownMs` (src/routing/attempts.ts), then is back in its place
 * (its count starts afresh). The state is this
 * gateway instance's alone, in memory: instances behind one load balancer each learn a provider's
 * outage from their own traffic, which costs each at most `failures` failed attempts per window and
 * needs no shared store on the request path.
 */
export interface CooldownSettings {
  failures: number;
  windowMs: number;
  cooldownMs: number;
}

export interface CoolingDeployment {
  deployment: string;
  /** Milliseconds until it is tried again. */
  remainingMs: number;
}

export class CooldownBoard {
  private readonly recent = new Map<string, number[]>();
  private readonly until = new Map<string, number>();

  constructor(
    private readonly settings: () => CooldownSettings,
    private readonly now: () => number = () => performance.now(),
  ) {}

  isCooling(deployment: string): boolean {
    const until = this.until.get(deployment);
    if (until === undefined) return false;
    if (this.now() < until) return true;
    this.until.delete(deployment);
    return false;
  }

  /** Counts a failure of the deployment's health; true when this failure started a cooldown. */
  recordFailure(deployment: string): boolean {
    const { failures, windowMs, cooldownMs } = this.settings();
    const now = this.now();
    const times = (this.recent.get(deployment) ?? []).filter((t) => now - t < windowMs);
    times.push(now);
    if (times.length < failures || this.isCooling(deployment)) {
      this.recent.set(deployment, times);
      return false;
    }
    this.recent.delete(deployment);
    this.until.set(deployment, now + cooldownMs);
    return true;
  }

  /** How many of the deployment's failures within the window count toward its next cooldown (diagnostics and tests). */
  recentFailures(deployment: string): number {
    const { windowMs } = this.settings();
    const now = this.now();
    return (this.recent.get(deployment) ?? []).filter((t) => now - t < windowMs).length;
  }

  /** The deployments cooling down now, for /health. */
  cooling(): CoolingDeployment[] {
    const now = this.now();
    return [...this.until.keys()]
      .filter((d) => this.isCooling(d))
      .map((d) => ({ deployment: d, remainingMs: Math.max(0, Math.round(this.until.get(d)! - now)) }));
  }
}
