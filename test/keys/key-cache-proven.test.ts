import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KeyRow } from '../../src/keys/api-keys.ts';
import { KeyCache } from '../../src/keys/key-cache.ts';

/**
 * KeyCache.proven: the keys a read found active, which pass a client bucket blocked for failed
 * authentications (src/http/auth/auth-failure-limit.ts). It outlives the row cache (a day, not
 * keys.lookupCacheSeconds), and only ever admits a key to its lookup, so what it must get right is
 * never holding a hash no read found active, and letting go of one a read found gone or expired.
 */
const T = 1_700_000_000_000;
const row = (id: number, expires_at: number | null = null) => ({ id, expires_at }) as KeyRow;

for (const ttlMs of [2_000, 0]) {
  test(`proven: what reads found active, for a day; not unknown, revoked, expired or forgotten keys (row cache ${ttlMs} ms)`, async () => {
    let now = T;
    const cache = new KeyCache(ttlMs, () => now);
    let reads = 0;
    const found = (r: KeyRow | undefined) => async () => (reads++, r);

    assert.equal(cache.proven('junk'), false, 'never looked up');
    await cache.lookup('junk', found(undefined));
    assert.equal(cache.proven('junk'), false, 'looked up and unknown: no negative entry, no proof');

    await cache.lookup('a', found(row(1)));
    assert.equal(cache.proven('a'), true);
    now += ttlMs + 60 * 60_000;
    assert.equal(cache.proven('a'), true, 'long after its row left the cache');
    now += 24 * 60 * 60_000;
    assert.equal(cache.proven('a'), false, 'a day after its last read');

    await cache.lookup('b', found(row(2)));
    now += ttlMs + 1;
    await cache.lookup('b', found(undefined));
    assert.equal(cache.proven('b'), false, 'a read found it revoked (elsewhere)');

    await cache.lookup('c', found(row(3)));
    cache.forget(3);
    assert.equal(cache.proven('c'), false, 'revoked on this instance');

    await cache.lookup('d', found(row(4, now - 1)));
    assert.equal(cache.proven('d'), false, 'read, but past its expiry');

    await cache.lookup('e', found(row(5)));
    cache.changed(5);
    assert.equal(cache.proven('e'), true, 'its limits changed here: still active, still proven');
    const readsBeforeChange = reads;
    await cache.lookup('e', found(row(5, now - 1)));
    assert.equal(reads, readsBeforeChange + 1, 'the change is read by the next lookup');
    assert.equal(cache.proven('e'), false, 'and a change that expired it lets the proof go');

    const before = reads;
    for (const hash of ['junk', 'b', 'c', 'd', 'e', 'never']) cache.proven(hash);
    assert.equal(reads, before, 'asking reads nothing');
  });
}

/*
 * The proven map is bounded (100,000 hashes), and it was bounded by clearing it: whoever got
 * 100,000 keys proven on an instance (keys are free: 50 per wallet, wallets free, then one request
 * each from any address) wiped every proof at once, and the honest users of a blocked bucket, who
 * can no longer be read to be proven again, were 429 until the neighbour stopped. A key still being
 * used must outlive a flood of other proofs: the oldest proof goes first, and a read moves a key to
 * the back.
 */
test('attack: 150,000 other keys proven cannot evict a key in use (proofs are dropped oldest first)', async () => {
  let now = T;
  const cache = new KeyCache(2_000, () => now);
  const found = (r: KeyRow) => async () => r;
  await cache.lookup('honest', found(row(1)));
  for (let i = 0; i < 150_000; i++) {
    await cache.lookup(`attacker-${i}`, found(row(10 + i)));
    assert.equal(cache.proven('honest'), true, `after ${i + 1} other keys were proven`);
    // The honest user's requests: a read each time its row has left the row cache (every 2 s).
    if (i % 1_000 === 999) {
      now += 2_001;
      await cache.lookup('honest', found(row(1)));
    }
  }
  assert.equal(cache.proven('attacker-0'), false, 'the oldest proofs went');
  assert.equal(cache.proven('attacker-149999'), true);
});
