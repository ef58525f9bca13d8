import type { KeyRow } from './api-keys.ts';

/**
 * Recently seen active API keys, by hash, for at most `ttlMs`. It takes the key lookup off the
 * chat hot path. A revocation on this instance removes the key at once; one on another instance
 * (or by the admin CLI) is honoured when the entry expires, so the TTL is capped at 5 s. Unknown and
 * revoked keys are never cached, so junk tokens cannot fill it.
 */
export class KeyCache {
  private readonly entries = new Map<string, { row: KeyRow; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get(hash: string): KeyRow | undefined {
    const entry = this.entries.get(hash);
    if (!entry) return undefined;
    if (entry.until <= this.now()) {
      this.entries.delete(hash);
      return undefined;
    }
    return entry.row;
  }

  remember(hash: string, row: KeyRow): void {
    if (this.ttlMs <= 0) return;
    if (this.entries.size >= 100_000) this.entries.clear();
    this.entries.set(hash, { row, until: this.now() + this.ttlMs });
  }

  forget(keyId: number): void {
    for (const [hash, entry] of this.entries) if (entry.row.id === keyId) this.entries.delete(hash);
  }
}
