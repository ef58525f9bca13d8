import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, newAccount, signInProof, siweProof } from '../support/siwe.ts';

/**
 * An attacker behind the same carrier NAT or IPv6 /64 as honest users gets their shared client
 * bucket blocked with a few junk keys a minute (rateLimits.authFailures), and a blocked bucket was
 * refused before its credentials were read: the honest users' working keys were 429 for as long as
 * the attacker kept going. A key this instance has already seen authenticate is let through to its
 * usual lookup; everything else in a blocked bucket is still refused before any database read.
 */
const LIMIT = 3;
// The gateway's key row cache (keys.lookupCacheSeconds, default 2 s): waited out, so the relief
// shown is not the row cache, which forgets a key two seconds after its last read.
const ROW_CACHE_MS = 2_000;

for (const engine of ENGINES) {
  describe(`attack: a neighbour keeps the shared client bucket blocked with junk keys (${engine})`, () => {
    let h: ChatHarness;
    let keyReads = 0;
    before(async () => {
      h = await startChatHarness(engine, { server: { trustProxy: ['127.0.0.1', '::1'] }, rateLimits: { authFailures: { perMinute: LIMIT } } });
      // A spy on the store: every read of api_keys (the key lookup a junk key would cost).
      const db = h.gw.services.storage.db;
      const selectFrom = db.selectFrom.bind(db);
      (db as { selectFrom: unknown }).selectFrom = (table: Parameters<typeof selectFrom>[0]) => {
        if (table === 'api_keys') keyReads++;
        return selectFrom(table);
      };
    });
    after(() => h.stop());

    const NAT = '2001:db8:77:1::';
    const chat = (key: string, from: string) =>
      call(
        h.gw.url,
        'POST',
        '/v1/chat/completions',
        { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] },
        { authorization: `Bearer ${key}`, 'x-forwarded-for': from },
      );
    // Keys of the right shape: each one is a database read unless refused before the lookup.
    const junkKey = () => `sk-${randomBytes(32).toString('base64url')}`;

    test('an honest key behind the blocked address is served; junk keys, a revoked key, a key never seen here, SIWE proofs and sessions are still 429 with no key read', async () => {
      const honest = await h.wallet(1_000_000);
      const revokedHere = await h.wallet(1_000_000);
      const revokedElsewhere = await h.wallet(1_000_000);
      const neverUsed = await h.wallet(1_000_000);
      for (const k of [honest, revokedHere, revokedElsewhere]) assert.equal((await chat(k.key, `${NAT}1`)).status, 200);
      const signIn = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(honest.account, { sessionMinutes: 30 }), {
        'x-forwarded-for': `${NAT}1`,
      });
      assert.equal(signIn.status, 201, signIn.text);

      // The neighbour, from another address of the same /64, gets the bucket blocked.
      const statuses = [];
      for (let i = 0; i <= LIMIT; i++) statuses.push((await chat(junkKey(), `${NAT}2`)).status);
      assert.deepEqual(statuses, [401, 401, 401, 429]);

      // Revoked on this instance (DELETE, from elsewhere) and, as another instance or the admin CLI
      // would, in the database alone.
      assert.equal((await call(h.gw.url, 'DELETE', `/v1/auth/keys/${revokedHere.keyId}`, await siweProof(revokedHere.account))).status, 200);
      await h.gw.services.storage.db.updateTable('api_keys').set({ revoked_at: Date.now() }).where('id', '=', revokedElsewhere.keyId).execute();
      await sleep(ROW_CACHE_MS + 200);

      const served = await chat(honest.key, `${NAT}1`);
      assert.equal(served.status, 200, `the honest user's working key, blocked by the neighbour: ${served.text}`);

      const readsBefore = keyReads;
      for (let i = 0; i < 20; i++) assert.equal((await chat(junkKey(), `${NAT}2`)).status, 429, 'junk keys stay refused');
      assert.equal((await chat(revokedHere.key, `${NAT}2`)).status, 429, 'a key revoked on this instance');
      assert.equal((await chat(neverUsed.key, `${NAT}3`)).status, 429, 'a valid key this instance has never seen (the residual)');
      assert.equal(keyReads, readsBefore, 'none of these cost a read of api_keys');

      // Revoked elsewhere: this instance learns it from the one read its lookup makes, then
      // refuses it before any read, like a junk key.
      assert.equal((await chat(revokedElsewhere.key, `${NAT}2`)).status, 429, 'a key revoked by another instance');
      assert.equal(keyReads, readsBefore + 1, 'one read, to find it revoked');
      assert.equal((await chat(revokedElsewhere.key, `${NAT}2`)).status, 429);
      assert.equal(keyReads, readsBefore + 1, 'and no more');

      // A SIWE proof costs a signature check (an RPC call for a contract wallet) before it can be
      // told from junk, and a session a database read: both stay refused.
      const newKey = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(newAccount()), { 'x-forwarded-for': `${NAT}1` });
      assert.equal(newKey.status, 429, newKey.text);
      const keys = await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, { authorization: `Bearer ${signIn.body.token}`, 'x-forwarded-for': `${NAT}1` });
      assert.equal(keys.status, 429, keys.text);

      assert.equal((await chat(honest.key, `${NAT}2`)).status, 200, 'still served, from any address of the bucket');
      await h.gw.assertLedger();
    });

    // Tightening a key's limits (PATCH, from any address) made the instance forget its proof as a
    // revocation does, though the key stays active: the owner who set a spend limit from their phone
    // found their key 429 behind the blocked carrier NAT (no read can prove it again there).
    const TIGHTENED_NAT = '2001:db8:78:1::';
    test('a key whose spend limit its owner set is still served behind the blocked address, under its new limit', async () => {
      const honest = await h.wallet(1_000_000);
      assert.equal((await chat(honest.key, `${TIGHTENED_NAT}1`)).status, 200);
      const statuses = [];
      for (let i = 0; i <= LIMIT; i++) statuses.push((await chat(junkKey(), `${TIGHTENED_NAT}2`)).status);
      assert.deepEqual(statuses, [401, 401, 401, 429]);

      // The owner, from another network, sets a spend limit the next chat cannot fit.
      const patched = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${honest.keyId}`, {
        ...(await siweProof(honest.account)),
        spend_limit_usdc: 1,
        spend_limit_period: 'day',
      });
      assert.equal(patched.status, 200, patched.text);
      await sleep(ROW_CACHE_MS + 200);

      const res = await chat(honest.key, `${TIGHTENED_NAT}1`);
      assert.notEqual(res.status, 429, `the owner's key behind the blocked address, after tightening it: ${res.text}`);
      assert.equal(res.status, 402, `refused by its new spend limit, not served: ${res.text}`);
      assert.equal((await chat(junkKey(), `${TIGHTENED_NAT}2`)).status, 429, 'junk keys stay refused');
      await h.gw.assertLedger();
    });
  });
}
