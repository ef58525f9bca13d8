import type { Usage } from '../protocols/internal.ts';

/**
 * The most tokens one request's usage may count, on any side: about 4.3 billion, hundreds of times
 * any context window. A provider's report above it (a sentinel, a unit mix-up, a lie) is read as this
 * many: charged what the balance allows, as any charge above the reservation. Unbounded, a count past
 * 2^63 failed the settle's write on PostgreSQL (a delivered stream charged nothing), and one just below
 * it, added to the key's running totals, made every later settle of the key overflow: its answers free.
 */
export const MAX_REPORTED_TOKENS = 2 ** 32;

const bounded = (n: number) => Math.min(n, MAX_REPORTED_TOKENS);

/** The usage with every count at most MAX_REPORTED_TOKENS; `clamped` says whether one was above. */
export function boundedUsage(u: Usage): { usage: Usage; clamped: boolean } {
  const { input, output } = u;
  const within = (n: number) => n <= MAX_REPORTED_TOKENS;
  if (within(input.total) && within(input.cacheRead) && within(input.cacheWrite) && within(output.total) && within(output.reasoning)) {
    return { usage: u, clamped: false };
  }
  return {
    usage: {
      ...u,
      input: { ...u.input, total: bounded(u.input.total), cacheRead: bounded(u.input.cacheRead), cacheWrite: bounded(u.input.cacheWrite) },
      output: { total: bounded(u.output.total), reasoning: bounded(u.output.reasoning) },
    },
    clamped: true,
  };
}
