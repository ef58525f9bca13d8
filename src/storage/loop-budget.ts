/**
 * How many write units one batch may take when it runs on the event loop (SQLite's statements are
 * calls into the process, not round trips): about as many as fill `budgetMs` at the time per unit
 * recent batches took, between `min` and `max`. A backlog then commits in slices with a turn of
 * the event loop between them, in which streams already under way send what their providers sent
 * and the first slices' callers go on, instead of every stream and every caller waiting for one
 * long batch: measured at 1,000 streams/s, batches of 256 units held the loop for 20-150 ms
 * (bench/README.md, "Where the time to first token went at 1,000 streams/s").
 */
export class LoopBudget {
  /** A moving average of the milliseconds a unit took in recent batches; 0 until one ran. */
  private msPerUnit = 0;

  constructor(
    private readonly budgetMs: number,
    private readonly min: number,
    private readonly max: number,
  ) {}

  /** Units the next batch may take: `min` until a batch was timed. */
  limit(): number {
    if (this.msPerUnit <= 0) return this.min;
    return Math.max(this.min, Math.min(this.max, Math.floor(this.budgetMs / this.msPerUnit)));
  }

  /** A batch of `units` ran (BEGIN to COMMIT) in `ms`. */
  ran(units: number, ms: number): void {
    if (units <= 0 || !(ms >= 0)) return;
    const perUnit = ms / units;
    // A fifth of each new batch: a slower machine shows within a few batches, one odd batch does not swing it.
    this.msPerUnit = this.msPerUnit === 0 ? perUnit : 0.8 * this.msPerUnit + 0.2 * perUnit;
  }
}
