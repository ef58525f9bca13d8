import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { createKeyProof, newAccount, signInProof } from '../support/siwe.ts';

/**
 * Dashboard sessions: a token opened with one SIWE proof reads the wallet's data, lists,
 * revokes and tightens keys, and nothing else (it never creates or loosens one: a key can spend).
 * Attackers: a key holder trying to manage keys with a (leaked)
 * API key; a session holder trying to spend with it or to read another wallet; anyone replaying an
 * expired, revoked or guessed token, or reading it from the logs.
 */
for (const engine of ENGINES) {
  describe(`dashboard sessions (${engine})`, () => {
    let h: ChatHarness;
    // The gateway's clock, moved forward by the expiry test.
    let skewMs = 0;
    before(async () => {
      h = await startChatHarness(engine, { dashboard: { sessionMinutes: 5 } }, { now: () => Date.now() + skewMs });
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    async function openSession(account = newAccount()) {
      const res = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(account, { sessionMinutes: 5 }));
      assert.equal(res.status, 201, res.text);
      return { account, token: res.body.token as string, body: res.body };
    }

    test('one SIWE proof opens a session that lists and revokes keys and reads usage and top-ups', async () => {
      const { account, token, body } = await openSession();
      assert.match(token, /^ses-[A-Za-z0-9_-]{43}$/);
      assert.equal(body.wallet, account.address.toLowerCase());
      assert.equal(body.expires_in, 300);
      // Creating a key needs its own proof (test/sessions/scope.test.ts).
      const created = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), label: 'from the dashboard' }, bearer(token));
      assert.equal(created.status, 201, created.text);
      const listed = await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, bearer(token));
      assert.deepEqual(
        listed.body.data.map((k: { label: string }) => k.label),
        ['from the dashboard'],
      );
      for (const path of [`/v1/usage/${account.address}`, `/v1/usage/${account.address}/daily`, `/v1/topups/${account.address}`]) {
        assert.equal((await call(h.gw.url, 'GET', path, undefined, bearer(token))).status, 200, path);
      }
      const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${created.body.id}`, undefined, bearer(token));
      assert.equal(revoked.status, 200, revoked.text);
    });

    test('the proof that opened a session cannot open a second one', async () => {
      const account = newAccount();
      const proof = await signInProof(account, { sessionMinutes: 5 });
      assert.equal((await call(h.gw.url, 'POST', '/v1/auth/session', proof)).status, 201);
      const again = await call(h.gw.url, 'POST', '/v1/auth/session', proof);
      assert.equal(again.status, 401);
      assert.match(again.body.message, /already used/);
    });

    test('a session on chat completions is 401 and reaches no provider', async () => {
      const { key, account } = await h.wallet(1_000_000);
      const { token } = await openSession(account);
      const before = h.fake.received.length;
      const res = await call(
        h.gw.url,
        'POST',
        '/v1/chat/completions',
        { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] },
        bearer(token),
      );
      assert.equal(res.status, 401);
      assert.match(res.body.message, /session cannot be used here/);
      assert.equal(h.fake.received.length, before);
      // The wallet's own key still works: the refusal is about the credential, not the wallet.
      const ok = await call(h.gw.url, 'POST', '/v1/chat/completions', { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }, bearer(key));
      assert.equal(ok.status, 200, ok.text);
    });

    test('an API key on key management (create, list, revoke) is 401', async () => {
      const { key, keyId } = await h.wallet(0);
      const create = await call(h.gw.url, 'POST', '/v1/auth/keys', { label: 'minted with a leaked key' }, bearer(key));
      assert.equal(create.status, 401);
      assert.match(create.body.message, /API key cannot manage keys/);
      assert.equal((await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, bearer(key))).status, 401);
      assert.equal((await call(h.gw.url, 'DELETE', `/v1/auth/keys/${keyId}`, undefined, bearer(key))).status, 401);
      // The key was not revoked by its own holder, and no second key exists.
      assert.equal(
        (await call(h.gw.url, 'POST', '/v1/chat/completions', { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }, bearer(key))).status,
        402,
      );
    });

    test('a session of another wallet reading usage, daily usage or top-ups is 403', async () => {
      const victim = newAccount();
      const { token } = await openSession();
      for (const path of [`/v1/usage/${victim.address}`, `/v1/usage/${victim.address}/daily`, `/v1/topups/${victim.address}`]) {
        const res = await call(h.gw.url, 'GET', path, undefined, bearer(token));
        assert.equal(res.status, 403, path);
        assert.equal(res.body.error, 'FORBIDDEN');
      }
    });

    test('a revoked session is refused everywhere, and revoking twice is 401', async () => {
      const { account, token } = await openSession();
      assert.equal((await call(h.gw.url, 'DELETE', '/v1/auth/session', undefined, bearer(token))).status, 200);
      assert.equal((await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, bearer(token))).status, 401);
      assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, bearer(token))).status, 401);
      assert.equal((await call(h.gw.url, 'DELETE', '/v1/auth/session', undefined, bearer(token))).status, 401);
    });

    test('an expired session is refused', async () => {
      const { account, token } = await openSession();
      assert.equal((await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, bearer(token))).status, 200);
      skewMs = 5 * 60_000 + 1000;
      try {
        const res = await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, bearer(token));
        assert.equal(res.status, 401);
        assert.match(res.body.message, /expired/);
        assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, bearer(token))).status, 401);
      } finally {
        skewMs = 0;
      }
    });

    test('the owner ends every session of its wallet, one it no longer holds included; other wallets keep theirs', async () => {
      const account = newAccount();
      const seen = await openSession(account); // read off a shared screen, say: the owner cannot end it alone
      const own = await openSession(account);
      const other = await openSession();
      const ended = await call(h.gw.url, 'DELETE', '/v1/auth/sessions', undefined, bearer(own.token));
      assert.equal(ended.status, 200, ended.text);
      assert.deepEqual(ended.body, { revoked: 2, wallet: account.address.toLowerCase() });
      for (const token of [seen.token, own.token]) {
        assert.equal((await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, bearer(token))).status, 401);
        assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, bearer(token))).status, 401);
      }
      assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${other.account.address}`, undefined, bearer(other.token))).status, 200);
      // An ended session ends nothing more; a key, a guess or nothing at all is 401.
      assert.equal((await call(h.gw.url, 'DELETE', '/v1/auth/sessions', undefined, bearer(seen.token))).status, 401);
      assert.equal((await call(h.gw.url, 'DELETE', '/v1/auth/sessions', undefined, bearer(`ses-${'A'.repeat(43)}`))).status, 401);
      const { key } = await h.wallet(0);
      assert.equal((await call(h.gw.url, 'DELETE', '/v1/auth/sessions', undefined, bearer(key))).status, 401);
      const bare = await call(h.gw.url, 'DELETE', '/v1/auth/sessions');
      assert.equal(bare.status, 401);
      assert.match(bare.body.message, /POST \/v1\/auth\/session/);
      assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${other.account.address}`, undefined, bearer(other.token))).status, 200);
    });

    test('a guessed or altered token is 401', async () => {
      const { token } = await openSession();
      for (const guess of [`ses-${'A'.repeat(43)}`, `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`, 'ses-short']) {
        assert.equal((await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, bearer(guess))).status, 401, guess);
      }
    });

    test('the token is stored hashed and never written to the logs', async () => {
      const { account, token } = await openSession();
      await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, bearer(token));
      await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, bearer(`${token}x`));
      await call(h.gw.url, 'DELETE', '/v1/auth/session', undefined, bearer(token));
      assert.ok(!h.gw.logs().includes(token.slice(4)), 'the session token reached the log');
      const rows = await h.gw.services.storage.db.selectFrom('dashboard_sessions').select('token_hash').execute();
      assert.ok(rows.length > 0);
      assert.ok(rows.every((r) => !r.token_hash.includes(token.slice(4))));
    });
  });
}
