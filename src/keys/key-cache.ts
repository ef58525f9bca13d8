import type { KeyRow } from './api-keys.ts';

/** How long a key a read found active counts as proven (see KeyCache.proven): a day of an honest user's habits. */
const PROVEN_MS = 24 * 60 * 60_000;
/** At most this many proven hashes are remembered per instance. */
const MAX_PROVEN = 100_000;

/**
 * Recently seen active API keys, by hash, for at most `ttlMs`. It takes the key lookup off the
 * chat hot path. A revocation on this instance removes the key at once; one on another instance
 * (or by the admin CLI) is honoured when the entry expires, so the TTL is capped at 5 s. Unknown and
 * revoked keys are never cached, so junk tokens cannot fill it.
 *
 * A busy key never makes its requests wait on the database: once its entry is past half its life,
 * the request that notices starts one read in the background and is answered from the entry, which
 * the read then replaces. And reads of one key never pile up: requests that find no entry while a
 * read of that key is under way wait for that read. Without both, each expiry of a key sending
 * 1,000 requests a second costs a read per request until the first answers (on PostgreSQL, a burst
 * of reads queued on the pool for up to a second under load: bench/README.md, "Where the time to
 * first token went at 1,000 streams/s"). Neither serves a row older than `ttlMs`.
 *
 * Apart from the rows, it remembers for a day which hashes a read found active (`proven`): a client
 * bucket blocked for failed authentications lets those keys through to their lookup, while junk
 * keys stay refused before any read (src/http/auth/auth-failure-limit.ts). That memory only admits
 * a key to the lookup, never answers for it: a key revoked meanwhile elsewhere is found revoked by
 * that lookup (and forgotten).
 */
export class KeyCache {
  private readonly entries = new Map<string, { row: KeyRow; until: number; refreshAt: number }>();
  /** Hashes a read found active, with their key's id and until when they count as proven. */
  private readonly provenUntil = new Map<string, { id: number; until: number }>();
  private readonly reading = new Map<string, Promise<KeyRow | undefined>>();
  /** Moves on every `forget`: a read started before it must not put back what was forgotten. */
  private epoch = 0;

  constructor(
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The active key with this hash, from the cache while its entry is fresh, else from `read`. */
  lookup(hash: string, read: () => Promise<KeyRow | undefined>): Promise<KeyRow | undefined> {
    // No cache asked for: every request reads, and sees the key as it is when it arrives.
    if (this.ttlMs <= 0) {
      const epoch = this.epoch;
      return read().then((row) => (this.prove(hash, row, epoch), row));
    }
    const entry = this.entries.get(hash);
    const now = this.now();
    if (entry && entry.until > now) {
      if (entry.refreshAt <= now) this.readOnce(hash, read).catch(() => undefined); // a failed refresh leaves the entry to expire
      return Promise.resolve(entry.row);
    }
    if (entry) this.entries.delete(hash);
    return this.readOnce(hash, read);
  }

  /** Whether a read found this hash's key active in the last day on this instance (and it was not revoked here since). */
  proven(hash: string): boolean {
    const proof = this.provenUntil.get(hash);
    return proof !== undefined && proof.until > this.now();
  }

  /** A key revoked on this instance: its row goes, and so does its proof. */
  forget(keyId: number): void {
    this.changed(keyId);
    for (const [hash, proof] of this.provenUntil) if (proof.id === keyId) this.provenUntil.delete(hash);
  }

  /**
   * A key changed on this instance (its limits): its row goes, so that the next request reads the
   * change. It stays proven, being still active: forgetting the proof would leave its owner 429 in
   * a blocked client bucket, where nothing can read it to prove it again. Should the change have
   * expired it, that read lets the proof go.
   */
  changed(keyId: number): void {
    this.epoch++;
    // A read under way may have seen the key before the change: the next request reads again.
    this.reading.clear();
    for (const [hash, entry] of this.entries) if (entry.row.id === keyId) this.entries.delete(hash);
  }

  /** One read of `hash` at a time: a caller that comes while one is under way waits for it. */
  private readOnce(hash: string, read: () => Promise<KeyRow | undefined>): Promise<KeyRow | undefined> {
    const under = this.reading.get(hash);
    if (under) return under;
    const epoch = this.epoch;
    const startedAt = this.now();
    const reading = read()
      .then((row) => {
        // Timed from the read's start: the row is as old as the moment it was read.
        if (row && epoch === this.epoch) this.remember(hash, row, startedAt);
        if (!row) this.entries.delete(hash);
        this.prove(hash, row, epoch);
        return row;
      })
      .finally(() => {
        if (this.reading.get(hash) === reading) this.reading.delete(hash);
      });
    this.reading.set(hash, reading);
    return reading;
  }

  /**
   * Records what a read found: an active key is proven for a day; a missing (unknown or revoked)
   * one, or one past its expiry, no longer.
   */
  private prove(hash: string, row: KeyRow | undefined, epoch: number): void {
    if (!row || (row.expires_at !== null && row.expires_at <= this.now())) this.provenUntil.delete(hash);
    else if (epoch === this.epoch) {
      // Set again at the back, so the map runs from the oldest proof to the newest. Full, it drops
      // the oldest, never all: a clear let anyone with 100,000 free keys wipe every proof at once,
      // locking the honest users of a blocked bucket out (none can be read to be proven again).
      this.provenUntil.delete(hash);
      if (this.provenUntil.size >= MAX_PROVEN) this.provenUntil.delete(this.provenUntil.keys().next().value!);
      this.provenUntil.set(hash, { id: row.id, until: this.now() + PROVEN_MS });
    }
  }

  private remember(hash: string, row: KeyRow, readAt: number): void {
    if (this.entries.size >= 100_000) this.entries.clear();
    this.entries.set(hash, { row, until: readAt + this.ttlMs, refreshAt: readAt + this.ttlMs / 2 });
  }
}
