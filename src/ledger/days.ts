/** A UTC day in milliseconds: the unit of the ledger's day arithmetic (key spend buckets, usage_daily). */
export const DAY_MS = 86_400_000;

/** The UTC day a usage row at `ms` counts towards in usage_daily (days since 1970-01-01). */
export const usageDay = (ms: number): number => Math.floor(ms / DAY_MS);
