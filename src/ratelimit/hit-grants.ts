import type { RateDecision, RateWindow } from './limiter.ts';

/**
 * How long an instance may spend hits Redis granted it ahead of time. Redis records every granted
 * hit but the first at its grant time plus this, so a hit spent up to this late still counts for a
 * whole window after it was made: a grant can never let more through than the limit.
 */
export const GRANT_MS = 1_000;
/** The most hits one grant takes; a key's grants double from 1 while it spends each before it runs out. */
export const MAX_GRANT = 64;
/** Keys whose grant sizes are remembered; past this, the least recently asked is forgotten (its unspent hits given back). */
export const MAX_GRANT_KEYS = 50_000;

/** Hits granted and not spent, to give back to Redis: the members to remove from a key's window. */
export interface Unspent {
  key: string;
  members: string[];
}

interface Grant {
  windows: string;
  /** The decision Redis made for the latest grant's first hit (spent at once). */
  decision: RateDecision;
  /** Hits of the latest grant, and hits spent since its decision (its first included). */
  granted: number;
  spent: number;
  /** The members in Redis of the hits not yet spent (`<Redis now>-<suffix>-<j>`). */
  unspent: string[];
  /** performance.now() past which no hit may be spent: the earliest deadline of the grants merged here. */
  until: number;
}

interface KeyState {
  grant: Grant | null;
  /** How many hits the next grant asks for. */
  want: number;
}

const signature = (windows: RateWindow[]) => windows.map((w) => `${w.limit}/${w.windowMs}`).join(',');

/**
 * The hits Redis granted this instance ahead of time, per key. A busy key costs one Redis round
 * trip per grant instead of one per hit, and no hit is ever spent that Redis has not counted.
 */
export class HitGrants {
  private readonly keys = new Map<string, KeyState>();
  private unspent: Unspent[] = [];

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** A hit from a grant still valid for these windows, or undefined: then Redis must decide. */
  take(key: string, windows: RateWindow[]): RateDecision | undefined {
    const g = this.keys.get(key)?.grant;
    if (!g || g.unspent.length === 0 || this.now() >= g.until || g.windows !== signature(windows)) return undefined;
    // Any unspent hit will do: every one is counted in Redis until at least `until` plus its window.
    g.unspent.shift();
    g.spent++;
    // Each hit spent lowers what the key has left, as a hit decided by Redis would.
    return { ...g.decision, remaining: Math.max(0, g.decision.remaining - (g.spent - 1)) };
  }

  /** How many hits to ask for: double the last grant if it was all spent in time, else what was spent of it. */
  want(key: string): number {
    const state = this.keys.get(key);
    return state ? nextWant(state.grant, state.want, this.now()) : 1;
  }

  /**
   * Records what Redis granted for an allowed hit (`granted` hits, the first spent by that hit);
   * `asked`: how many were asked for, `askedAt`: when the request left, on this clock.
   */
  keep(key: string, windows: RateWindow[], grant: { decision: RateDecision; granted: number; asked: number; askedAt: number; base: string }): void {
    const state = this.keys.get(key);
    if (state) this.keys.delete(key);
    else if (this.keys.size >= MAX_GRANT_KEYS) {
      const [oldest, old] = this.keys.entries().next().value!;
      this.keys.delete(oldest);
      this.giveBack(oldest, old.grant);
    }
    const { decision, granted, asked, askedAt, base } = grant;
    const unspent = Array.from({ length: granted - 1 }, (_, j) => `${base}-${j + 1}`);
    let until = askedAt + GRANT_MS;
    const sig = signature(windows);
    const held = state?.grant;
    // Concurrent requests of one key each ask Redis when the grant runs out: their grants are
    // merged, not given back, under the earlier deadline (so every hit still counts long enough).
    if (held && held.windows === sig && this.now() < held.until) {
      unspent.push(...held.unspent);
      until = Math.min(until, held.until);
    } else this.giveBack(key, held ?? null);
    // Map order is recency order: the key moves to the end.
    this.keys.set(key, { grant: { windows: sig, decision, granted, spent: 1, unspent, until }, want: asked });
  }

  /** Grants that ran out with hits unspent: forgotten here, returned to give back to Redis. */
  sweep(): Unspent[] {
    const now = this.now();
    for (const [key, state] of this.keys) {
      if (state.grant && now >= state.grant.until) {
        this.giveBack(key, state.grant);
        state.want = Math.max(1, state.grant.spent);
        state.grant = null;
      }
    }
    const out = this.unspent;
    this.unspent = [];
    return out;
  }

  /** Forgets every grant (Redis went away: what it counted may be gone, so nothing granted by it is spent). */
  clear(): void {
    this.keys.clear();
    this.unspent = [];
  }

  private giveBack(key: string, g: Grant | null): void {
    if (g?.unspent.length) this.unspent.push({ key, members: g.unspent });
  }
}

/**
 * The next grant's size: double while each grant is spent before it runs out, else what the last
 * one spent (a key hit once a second or less asks for one hit at a time, as without grants).
 */
function nextWant(last: Grant | null, want: number, now: number): number {
  if (!last) return want;
  if (last.unspent.length === 0 && now < last.until) return Math.min(MAX_GRANT, Math.max(want, last.granted) * 2);
  return Math.max(1, Math.min(MAX_GRANT, last.spent));
}
