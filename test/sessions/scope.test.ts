import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import type { PrivateKeyAccount } from 'viem/accounts';
import { ACTIONS } from '../../src/siwe/actions.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, newAccount, proofQuery, signInProof, siweProof } from '../support/siwe.ts';

/**
 * A dashboard session, or a SIWE proof signed for anything else, must not mint a key or
 * loosen one. A session reads, lists, revokes and tightens; creating or loosening needs a fresh
 * proof whose statement names that action, and a proof counts for its own action only.
 */
const CREATE = ACTIONS['create-key'].statement(30);
const DAY = 86_400_000;
const isoIn = (ms: number) => new Date(Date.now() + ms).toISOString();

for (const engine of ENGINES) {
  describe(`session and proof scope (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine);
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    async function signIn(account: PrivateKeyAccount): Promise<Record<string, string>> {
      const res = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(account));
      assert.equal(res.status, 201, res.text);
      return bearer(res.body.token);
    }
    async function createKey(account: PrivateKeyAccount, limits: Record<string, unknown> = {}): Promise<number> {
      const res = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), ...limits });
      assert.equal(res.status, 201, res.text);
      return res.body.id;
    }
    /** The key as the owner reads it back with a fresh list proof. */
    async function readKey(account: PrivateKeyAccount, id: number) {
      const res = await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(await siweProof(account, { action: 'manage-keys' }))}`);
      assert.equal(res.status, 200, res.text);
      const k = res.body.data.find((row: { id: number }) => row.id === id);
      return {
        spend_limit_usdc: k.spend_limit_usdc,
        spend_limit_period: k.spend_limit_period,
        models: k.models,
        expires_at: k.expires_at,
        revoked_at: k.revoked_at,
      };
    }
    const keyCount = async (account: PrivateKeyAccount) =>
      (await h.gw.services.storage.db.selectFrom('api_keys').select('id').where('wallet', '=', account.address.toLowerCase()).execute()).length;
    const sessionCount = async (account: PrivateKeyAccount) =>
      (await h.gw.services.storage.db.selectFrom('dashboard_sessions').select('wallet').where('wallet', '=', account.address.toLowerCase()).execute()).length;

    describe('attack: a stolen dashboard session mints a key', () => {
      test('a session cannot create a key (403 naming the statement to sign), with or without a code; no key is made', async () => {
        const owner = newAccount();
        const session = await signIn(owner);
        for (const body of [{ label: 'stolen tab' }, { label: 'stolen tab', ref_code: 'ref-aaaaaaaaaa' }]) {
          const res = await call(h.gw.url, 'POST', '/v1/auth/keys', body, session);
          assert.equal(res.status, 403, res.text);
          assert.equal(res.body.error, 'FORBIDDEN');
          assert.match(res.body.message, /a dashboard session cannot do this: creating an API key needs a fresh SIWE proof/);
          assert.ok(res.body.message.includes(CREATE), res.body.message);
        }
        assert.equal(await keyCount(owner), 0);
      });
    });

    describe('attack: a stolen dashboard session loosens a key', () => {
      const loosenings: [string, Record<string, unknown>, Record<string, unknown>][] = [
        ['raising the cap', { spend_limit_usdc: 1_000 }, { spend_limit_usdc: 1_001 }],
        ['removing the cap', { spend_limit_usdc: 1_000 }, { spend_limit_usdc: null }],
        ['moving the cap to a period that resets more often', { spend_limit_usdc: 1_000, spend_limit_period: 'month' }, { spend_limit_period: 'day' }],
        ['widening the model list', { models: ['fake/chat-small'] }, { models: ['fake/chat-small', 'fake/thinker'] }],
        ['removing the model list', { models: ['fake/chat-small'] }, { models: null }],
        ['extending the expiry', { expires_at: isoIn(DAY) }, { expires_at: isoIn(2 * DAY) }],
        ['removing the expiry', { expires_at: isoIn(DAY) }, { expires_at: null }],
        ['tightening the cap while removing the model list', { spend_limit_usdc: 1_000, models: ['fake/chat-small'] }, { spend_limit_usdc: 10, models: null }],
      ];
      for (const [what, limits, change] of loosenings) {
        test(`${what}: 403, and the key reads back unchanged`, async () => {
          const owner = newAccount();
          const id = await createKey(owner, limits);
          const before = await readKey(owner, id);
          const res = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${id}`, change, await signIn(owner));
          assert.equal(res.status, 403, res.text);
          assert.equal(res.body.error, 'FORBIDDEN');
          assert.match(res.body.message, /this change loosens .*the key is unchanged/);
          assert.ok(res.body.message.includes(ACTIONS['loosen-key'].statement(30)), res.body.message);
          assert.deepEqual(await readKey(owner, id), before);
        });
      }
    });

    describe('what a session may still do', () => {
      test('list, tighten (cap, period, model list, expiry; a first limit on an open key) and revoke', async () => {
        const owner = newAccount();
        const session = await signIn(owner);
        const expiry = isoIn(2 * DAY);
        const capped = await createKey(owner, {
          spend_limit_usdc: 1_000,
          spend_limit_period: 'day',
          models: ['fake/chat-small', 'fake/thinker'],
          expires_at: expiry,
        });
        const open = await createKey(owner);

        const listed = await call(h.gw.url, 'GET', '/v1/auth/keys', undefined, session);
        assert.equal(listed.status, 200, listed.text);
        assert.deepEqual(
          listed.body.data.map((k: { id: number }) => k.id),
          [capped, open],
        );

        const earlier = isoIn(DAY);
        const tightened = await call(
          h.gw.url,
          'PATCH',
          `/v1/auth/keys/${capped}`,
          { spend_limit_usdc: 500, spend_limit_period: 'total', models: ['fake/thinker'], expires_at: earlier },
          session,
        );
        assert.equal(tightened.status, 200, tightened.text);
        assert.deepEqual(await readKey(owner, capped), {
          spend_limit_usdc: 500,
          spend_limit_period: 'total',
          models: ['fake/thinker'],
          expires_at: new Date(Date.parse(earlier)).toISOString(),
          revoked_at: null,
        });
        // The same values again change nothing, which is not a loosening.
        assert.equal((await call(h.gw.url, 'PATCH', `/v1/auth/keys/${capped}`, { spend_limit_usdc: 500 }, session)).status, 200);

        const limited = await call(
          h.gw.url,
          'PATCH',
          `/v1/auth/keys/${open}`,
          { spend_limit_usdc: 1, models: ['fake/chat-small'], expires_at: earlier },
          session,
        );
        assert.equal(limited.status, 200, limited.text);
        assert.equal((await readKey(owner, open)).spend_limit_usdc, 1);

        const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${open}`, undefined, session);
        assert.equal(revoked.status, 200, revoked.text);
        assert.ok((await readKey(owner, open)).revoked_at);
      });

      test('signing out leaves no key the session could have made', async () => {
        const owner = newAccount();
        const session = await signIn(owner);
        assert.equal((await call(h.gw.url, 'POST', '/v1/auth/keys', {}, session)).status, 403);
        assert.equal((await call(h.gw.url, 'DELETE', '/v1/auth/session', undefined, session)).status, 200);
        assert.equal(await keyCount(owner), 0);
      });
    });

    describe('attack: a proof spent on an action it was not signed for', () => {
      test('a sign-in proof cannot create a key, and stays usable to sign in (its nonce is not spent)', async () => {
        const owner = newAccount();
        const proof = await signInProof(owner);
        const res = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...proof, label: 'x' });
        assert.equal(res.status, 403, res.text);
        assert.match(res.body.message, /this SIWE proof was not signed for this action; creating an API key needs/);
        assert.ok(res.body.message.includes(CREATE));
        assert.equal(await keyCount(owner), 0);
        assert.equal((await call(h.gw.url, 'POST', '/v1/auth/session', proof)).status, 201);
      });

      test('the old dashboard wording, the old CLI wording, another statement or none cannot create a key', async () => {
        const owner = newAccount();
        for (const statement of [
          'Sign in to the Tollgate dashboard for 30 minutes. This signature moves no money.',
          'Manage my Tollgate API keys',
          'Read my Tollgate usage',
          'Hello',
          undefined,
        ]) {
          const proof = statement === undefined ? await siweProof(owner, { statement: '' }) : await siweProof(owner, { statement });
          const res = await call(h.gw.url, 'POST', '/v1/auth/keys', proof);
          assert.equal(res.status, 403, `${statement}: ${res.text}`);
        }
        assert.equal(await keyCount(owner), 0);
      });

      test('a key-creation proof cannot open a session (and a sign-in proof with another session length cannot either)', async () => {
        const owner = newAccount();
        const res = await call(h.gw.url, 'POST', '/v1/auth/session', await createKeyProof(owner));
        assert.equal(res.status, 403, res.text);
        assert.match(res.body.message, /opening a dashboard session needs/);
        const longer = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(owner, { sessionMinutes: 600 }));
        assert.equal(longer.status, 403, longer.text);
        assert.equal(await sessionCount(owner), 0);
      });

      test('a key-creation proof cannot list or revoke keys, nor read usage', async () => {
        const owner = newAccount();
        const id = await createKey(owner);
        assert.equal((await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(await createKeyProof(owner))}`)).status, 403);
        assert.equal((await call(h.gw.url, 'DELETE', `/v1/auth/keys/${id}`, await createKeyProof(owner))).status, 403);
        assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${owner.address}?${proofQuery(await createKeyProof(owner))}`)).status, 403);
        assert.equal((await readKey(owner, id)).revoked_at, null);
      });

      test('a list-and-revoke proof can tighten but not loosen; a loosening proof can', async () => {
        const owner = newAccount();
        const id = await createKey(owner, { spend_limit_usdc: 1_000 });
        const manage = (change: Record<string, unknown>) =>
          siweProof(owner, { action: 'manage-keys' }).then((p) => call(h.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { ...p, ...change }));
        assert.equal((await manage({ spend_limit_usdc: 900 })).status, 200);
        assert.equal((await manage({ spend_limit_usdc: null })).status, 403);
        assert.equal((await readKey(owner, id)).spend_limit_usdc, 900);
        const loosen = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { ...(await siweProof(owner, { action: 'loosen-key' })), spend_limit_usdc: null });
        assert.equal(loosen.status, 200, loosen.text);
        assert.equal((await readKey(owner, id)).spend_limit_usdc, null);
      });
    });

    describe('the owner with a fresh proof for the action', () => {
      test('creates a key, also beside a session header (the proof decides); a replayed creation proof is refused', async () => {
        const owner = newAccount();
        const proof = await createKeyProof(owner);
        const created = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...proof, label: 'owner' }, await signIn(owner));
        assert.equal(created.status, 201, created.text);
        const replay = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...proof, label: 'replay' });
        assert.equal(replay.status, 401, replay.text);
        assert.match(replay.body.message, /already used/);
        assert.equal(await keyCount(owner), 1);
      });

      test('GET /v1/auth/siwe lists the statement of every action', async () => {
        const res = await call(h.gw.url, 'GET', '/v1/auth/siwe');
        assert.equal(res.status, 200);
        assert.deepEqual(Object.keys(res.body.statements).sort(), ['create-key', 'loosen-key', 'manage-keys', 'read-usage', 'sign-in']);
        assert.equal(res.body.statements['create-key'], "Create an API key that can spend this wallet's balance.");
        assert.match(res.body.statements['sign-in'], /for 30 minutes.*cannot create a key or loosen/);
      });
    });
  });
}
