import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KeyRow } from '../../src/keys/api-keys.ts';
import { KeyCache } from '../../src/keys/key-cache.ts';

/**
 * The API-key cache in front of the database, on a clock the test moves: a busy key's requests
 * never queue one read each on the database (the tail of issue 38's 1,000 streams/s phase), and
 * no row older than the TTL is ever served.
 */
const row = (id: number, label = 'k'): KeyRow => ({ id, label }) as unknown as KeyRow;

/** A database read the test answers when it wants, counting how many were made. */
function reads() {
  const pending: Array<(r: KeyRow | undefined) => void> = [];
  return {
    count: 0,
    read(this: { count: number }) {
      this.count++;
      return new Promise<KeyRow | undefined>((resolve) => pending.push(resolve));
    },
    answer(r: KeyRow | undefined) {
      for (const resolve of pending.splice(0)) resolve(r);
    },
  };
}

/** A cache on a clock the test sets, holding key 7 (labelled 'old') as read at time 0. */
async function holdingOldRow() {
  const clock = { now: 0 };
  const cache = new KeyCache(2000, () => clock.now);
  const db = reads();
  const first = cache.lookup('h', () => db.read());
  db.answer(row(7, 'old'));
  await first;
  return { clock, cache, db };
}

describe('the API-key cache', () => {
  test('requests that miss while a read of their key is under way wait for that read: one read, not one per request', async () => {
    let now = 0;
    const cache = new KeyCache(2000, () => now);
    const db = reads();
    const waiting = Array.from({ length: 50 }, () => cache.lookup('h', () => db.read()));
    assert.equal(db.count, 1);
    db.answer(row(7));
    for (const r of await Promise.all(waiting)) assert.equal(r?.id, 7);
    now = 999;
    assert.equal((await cache.lookup('h', () => db.read()))?.id, 7);
    assert.equal(db.count, 1, 'an entry in the first half of its life needs no read');
  });

  test('past half its life an entry is still served at once, while one read in the background renews it', async () => {
    const { clock, cache, db } = await holdingOldRow();
    clock.now = 1200;
    // The background read is not answered yet: the requests are answered from the entry all the same.
    for (let i = 0; i < 20; i++) assert.equal((await cache.lookup('h', () => db.read()))?.label, 'old');
    assert.equal(db.count, 2, 'one background read for all of them');
    db.answer(row(7, 'new'));
    await new Promise((r) => setImmediate(r));
    clock.now = 2100; // past the old entry's end, within the renewed one's first half (read at 1200)
    assert.equal((await cache.lookup('h', () => db.read()))?.label, 'new');
    assert.equal(db.count, 2);
  });

  test('never serves a row older than its TTL: past it, requests wait for the read under way', async () => {
    const { clock, cache, db } = await holdingOldRow();
    clock.now = 1500;
    await cache.lookup('h', () => db.read()); // starts the background read, which does not answer
    clock.now = 2000;
    let answered: KeyRow | undefined | 'no' = 'no';
    const late = cache.lookup('h', () => db.read()).then((r) => (answered = r));
    await new Promise((r) => setImmediate(r));
    assert.equal(answered, 'no', 'the expired entry is not served');
    assert.equal(db.count, 2, 'and no second read is started');
    db.answer(undefined); // revoked meanwhile
    assert.equal(await late, undefined);
    assert.equal(db.count, 2);
  });

  test('a key forgotten (revoked here) while a read is under way is read again, and the old read does not put it back', async () => {
    const cache = new KeyCache(2000, () => 0);
    const db = reads();
    const before = cache.lookup('h', () => db.read());
    cache.forget(7);
    db.answer(row(7)); // read before the revocation
    await before;
    const afterRevoke = cache.lookup('h', () => db.read());
    assert.equal(db.count, 2, 'what was read before the revocation was not cached');
    db.answer(undefined);
    assert.equal(await afterRevoke, undefined);
    const again = cache.lookup('h', () => db.read());
    assert.equal(db.count, 3, 'a revoked key is never cached');
    db.answer(undefined);
    await again;
  });

  test('a request after a revocation here does not share a read started before it', async () => {
    const cache = new KeyCache(2000, () => 0);
    const db = reads();
    const before = cache.lookup('h', () => db.read());
    cache.forget(7);
    const afterRevoke = cache.lookup('h', () => db.read());
    assert.equal(db.count, 2);
    db.answer(undefined);
    await Promise.all([before, afterRevoke]);
  });

  test('with no cache (TTL 0) every request reads', async () => {
    const cache = new KeyCache(0, () => 0);
    const db = reads();
    const all = Array.from({ length: 3 }, () => cache.lookup('h', () => db.read()));
    assert.equal(db.count, 3);
    db.answer(row(1));
    await Promise.all(all);
  });
});
