import { ApiError } from '../refusal.ts';

/** count_tokens bodies up to this size are always admitted on the instance (CountingLimits.alwaysAdmittedBytes). */
export const SMALL_COUNT_BYTES = 64 * 1024;

/** How much body count_tokens takes on at once, per wallet and on the instance, in bytes. */
export interface CountingLimits {
  perWalletBytes: number;
  instanceBytes: number;
  /**
   * A body up to this size is always taken on the instance, whatever it holds: the CPU lane counts
   * it in a slice or two, so it cannot hold the lane, and refusing it would let a few free wallets
   * holding the instance budget shut every other client out. It still counts against its wallet.
   */
  alwaysAdmittedBytes?: number;
}

/**
 * count_tokens costs CPU time in proportion to its body (up to seconds for a maximal body of random
 * CJK text) and nothing in money, so what it may take on at once is bounded apart from the chat
 * rate limits: the bodies being counted for one wallet (every key of it together: keys are free to
 * make), and the large bodies on the whole instance, may not pass these sizes. Past them the
 * request is a 429 with Retry-After, before anything is counted. Counting
 * itself never holds the event loop (the CPU lane); this bounds how long a count can wait
 * behind others and the memory held meanwhile.
 */
export class CountingBudget {
  private readonly byWallet = new Map<string, number>();
  /** Bytes of the large bodies being counted: the small ones are not held to the instance bound. */
  private large = 0;

  constructor(private readonly limits: CountingLimits) {}

  /**
   * Throws the 429 `take` would throw now, taking nothing: asked on a request's headers with the
   * size it declares, so that a count refused anyway is refused before its body is read or the
   * wallet's chat window counts it (the route). `take` decides again on the body received.
   */
  check(wallet: string, bytes: number): void {
    const mine = this.byWallet.get(wallet) ?? 0;
    const { perWalletBytes, instanceBytes } = this.limits;
    if (mine > 0 && mine + bytes > perWalletBytes) throw busy(`this wallet already has ${mine} bytes being counted (at most ${perWalletBytes} at once)`);
    if (this.isLarge(bytes) && this.large > 0 && this.large + bytes > instanceBytes) {
      throw busy(`the gateway is counting ${this.large} bytes of large requests (at most ${instanceBytes} at once)`);
    }
  }

  /** Takes `bytes` for `wallet`, or throws the 429; the function returned gives them back. */
  take(wallet: string, bytes: number): () => void {
    this.check(wallet, bytes);
    const mine = this.byWallet.get(wallet) ?? 0;
    const isLarge = this.isLarge(bytes);
    this.byWallet.set(wallet, mine + bytes);
    if (isLarge) this.large += bytes;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      if (isLarge) this.large -= bytes;
      const left = (this.byWallet.get(wallet) ?? bytes) - bytes;
      if (left > 0) this.byWallet.set(wallet, left);
      else this.byWallet.delete(wallet);
    };
  }

  private isLarge(bytes: number): boolean {
    return bytes > (this.limits.alwaysAdmittedBytes ?? 0);
  }
}

const busy = (why: string) =>
  new ApiError(
    429,
    'RATE_LIMITED',
    `count_tokens is busy: ${why}; retry in a moment, or count smaller requests`,
    { retry_after_ms: 1000 },
    { 'retry-after': '1' },
  );
