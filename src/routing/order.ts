/** A deployment as the runner sees it: a name, and an optional share of the load. */
export interface RoutedTarget {
  /** Unique among a chain's targets: the cooldown, logs and metrics know it by this. */
  readonly id: string;
  /** Adjacent targets that all carry a weight form one rank, ordered per request by weight. */
  readonly weight?: number;
}

/**
 * The order a request tries its deployments in: as listed, except that each run of adjacent
 * weighted deployments (one rank) is shuffled, each request drawing the next one of the rank with
 * probability proportional to its weight among those not drawn yet. So weights 3 and 1 send about
 * three requests in four to the first, and the other stays its fallback.
 */
export function orderByWeight<T extends RoutedTarget>(targets: readonly T[], random: () => number = Math.random): T[] {
  const out: T[] = [];
  for (let i = 0; i < targets.length; ) {
    if (targets[i]!.weight === undefined) {
      out.push(targets[i++]!);
      continue;
    }
    const rank: T[] = [];
    while (i < targets.length && targets[i]!.weight !== undefined) rank.push(targets[i++]!);
    out.push(...weightedShuffle(rank, random));
  }
  return out;
}

function weightedShuffle<T extends RoutedTarget>(rank: T[], random: () => number): T[] {
  const left = [...rank];
  const out: T[] = [];
  while (left.length) {
    const total = left.reduce((sum, t) => sum + t.weight!, 0);
    let pick = random() * total;
    let index = left.findIndex((t) => (pick -= t.weight!) < 0);
    if (index < 0) index = left.length - 1;
    out.push(left.splice(index, 1)[0]!);
  }
  return out;
}
