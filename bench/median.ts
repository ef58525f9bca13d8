/** The median of the finite values (the mean of the middle two when their count is even); NaN when there are none. */
export function median(values: number[]): number {
  const sorted = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
