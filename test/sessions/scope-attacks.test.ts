import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { createSiweMessage, generateSiweNonce } from 'viem/siwe';
import type { PrivateKeyAccount } from 'viem/accounts';
import { ACTIONS } from '../../src/siwe/actions.ts';
import { loosenedLimits } from '../../src/keys/limit-direction.ts';
import { limitsFromColumns } from '../../src/keys/key-limits.ts';
import type { KeyLimits } from '../../src/keys/limits.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call, TEST_DOMAIN, TEST_ORIGIN } from '../support/gateway.ts';
import { createKeyProof, newAccount, proofQuery, signInProof, siweProof } from '../support/siwe.ts';

/**
 * Attacks on session and proof scope: a stolen dashboard session, or a proof signed for one action,
 * must never yield a credential that spends more. Attacks by an adversarial reviewer.
 */
const DAY = 86_400_000;
const isoIn = (ms: number) => new Date(Date.now() + ms).toISOString();
const CREATE = ACTIONS['create-key'].statement(30);
const LOOSEN = ACTIONS['loosen-key'].statement(30);
const SIGN_IN = ACTIONS['sign-in'].statement(30);
const MANAGE = ACTIONS['manage-keys'].statement(30);

/** A hand-built EIP-4361 message (resources, odd statements), signed by the account. */
async function rawProof(account: PrivateKeyAccount, o: { statement?: string; resources?: string[] }) {
  const message = createSiweMessage({
    domain: TEST_DOMAIN,
    address: account.address,
    statement: o.statement,
    uri: TEST_ORIGIN,
    version: '1',
    chainId: 8453,
    nonce: generateSiweNonce(),
    issuedAt: new Date(),
    resources: o.resources,
  });
  return { message, signature: await account.signMessage({ message }) };
}

/** Signs an arbitrary text (not produced by createSiweMessage). */
async function signText(account: PrivateKeyAccount, message: string) {
  return { message, signature: await account.signMessage({ message }) };
}

function suite(engine: (typeof ENGINES)[number]) {
  describe(`attack: session scope and action-bound proofs (${engine})`, () => {
    let h: ChatHarness;
    const seen: string[] = [];
    before(async () => {
      h = await startChatHarness(engine);
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
    const req = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const res = await call(h.gw.url, method, path, body, headers);
      seen.push(res.text);
      return res;
    };
    async function signIn(account: PrivateKeyAccount): Promise<{ token: string; headers: Record<string, string> }> {
      const res = await req('POST', '/v1/auth/session', await signInProof(account));
      assert.equal(res.status, 201, res.text);
      return { token: res.body.token, headers: bearer(res.body.token) };
    }
    async function createKey(account: PrivateKeyAccount, limits: Record<string, unknown> = {}): Promise<{ id: number; key: string }> {
      const res = await req('POST', '/v1/auth/keys', { ...(await createKeyProof(account)), ...limits });
      assert.equal(res.status, 201, res.text);
      return { id: res.body.id, key: res.body.key };
    }
    async function limitsOf(id: number): Promise<KeyLimits & { revoked_at: number | null }> {
      const row = await h.gw.services.storage.db
        .selectFrom('api_keys')
        .select(['spend_limit_usdc', 'spend_limit_period', 'allowed_models', 'expires_at', 'revoked_at'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      return { ...limitsFromColumns(row as never), revoked_at: row.revoked_at === null ? null : Number(row.revoked_at) };
    }
    const keyCount = async (account: PrivateKeyAccount) =>
      (await h.gw.services.storage.db.selectFrom('api_keys').select('id').where('wallet', '=', account.address.toLowerCase()).execute()).length;

    describe('statement look-alikes and encodings cannot create, loosen or open a session', () => {
      const variants: [string, string][] = [
        ['trailing space', `${CREATE} `],
        ['leading space', ` ${CREATE}`],
        ['double space', CREATE.replace(' ', '  ')],
        ['no final period', CREATE.slice(0, -1)],
        ['lower case', CREATE.toLowerCase()],
        ['upper case', CREATE.toUpperCase()],
        ['curly apostrophe', CREATE.replace("'", '\u2019')],
        ['Cyrillic C', `\u0421${CREATE.slice(1)}`],
        ['non-breaking space', CREATE.replace(' ', '\u00a0')],
        ['zero-width space', `${CREATE}\u200b`],
        ['tab', CREATE.replace(' ', '\t')],
        ['embedded after sign-in', `${SIGN_IN} ${CREATE}`],
        ['embedded before sign-in', `${CREATE} ${SIGN_IN}`],
        ['carriage return', `${CREATE}\r`],
      ];
      for (const [what, statement] of variants) {
        test(`create-key statement with ${what}: no key`, async () => {
          const owner = newAccount();
          let proof;
          try {
            proof = await rawProof(owner, { statement });
          } catch {
            return; // viem refuses to build it: nothing to sign
          }
          const res = await req('POST', '/v1/auth/keys', { ...proof, label: what });
          assert.ok(res.status === 401 || res.status === 403, `${what}: ${res.status} ${res.text}`);
          assert.equal(await keyCount(owner), 0);
        });
      }

      test('the exact create-key statement followed by a trailing newline in the message, or CRLF line ends: refused', async () => {
        const owner = newAccount();
        const good = await rawProof(owner, { statement: CREATE });
        for (const message of [`${good.message}\n`, good.message.replaceAll('\n', '\r\n'), good.message.replace(`\n\n${CREATE}\n\n`, `\n\n${CREATE} \n\n`)]) {
          const res = await req('POST', '/v1/auth/keys', await signText(owner, message));
          // 401: not in the exact EIP-4361 form; 403: a well-formed message whose statement is not exact.
          assert.ok(res.status === 401 || res.status === 403, res.text);
        }
        assert.equal(await keyCount(owner), 0);
      });

      test('a sign-in statement with resources naming key creation or loosening is still a sign-in proof', async () => {
        const owner = newAccount();
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        const resources = [`${TEST_ORIGIN}/v1/auth/keys`, 'urn:tollgate:create-key', 'urn:tollgate:loosen-key'];
        const create = await req('POST', '/v1/auth/keys', await rawProof(owner, { statement: SIGN_IN, resources }));
        assert.equal(create.status, 403, create.text);
        const loosen = await req('PATCH', `/v1/auth/keys/${id}`, { ...(await rawProof(owner, { statement: MANAGE, resources })), spend_limit_usdc: null });
        assert.equal(loosen.status, 403, loosen.text);
        assert.equal(await keyCount(owner), 1);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
      });

      test('a loosen statement look-alike on PATCH cannot loosen', async () => {
        const owner = newAccount();
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        for (const statement of [`${LOOSEN} `, LOOSEN.replace("'", '\u2019'), LOOSEN.toLowerCase(), `${MANAGE} ${LOOSEN}`, "Change an API key's limits"]) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { ...(await rawProof(owner, { statement })), spend_limit_usdc: null });
          assert.equal(res.status, 403, `${statement}: ${res.text}`);
        }
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
      });

      test('legacy and old-dashboard statements cannot open a session, loosen or create', async () => {
        const owner = newAccount();
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        for (const statement of [
          'Sign in to the Tollgate dashboard for 30 minutes. This signature moves no money.',
          'Manage my Tollgate API keys',
          'Read my Tollgate usage',
          'Read my Tollgate top-ups',
        ]) {
          assert.equal((await req('POST', '/v1/auth/session', await siweProof(owner, { statement }))).status, 403, statement);
          assert.equal((await req('POST', '/v1/auth/keys', await siweProof(owner, { statement }))).status, 403, statement);
          const p = await req('PATCH', `/v1/auth/keys/${id}`, { ...(await siweProof(owner, { statement })), spend_limit_usdc: 2_000 });
          assert.equal(p.status, 403, `${statement}: ${p.text}`);
        }
        assert.equal(await keyCount(owner), 1);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
      });
    });

    describe('a proof spent on another action', () => {
      test('sign-in proof on PATCH (tighten or loosen) and on DELETE: 403; it still opens a session', async () => {
        const owner = newAccount();
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        const proof = await signInProof(owner);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { ...proof, spend_limit_usdc: 5_000 })).status, 403);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { ...proof, spend_limit_usdc: 5 })).status, 403);
        assert.equal((await req('DELETE', `/v1/auth/keys/${id}`, proof)).status, 403);
        assert.equal((await req('GET', `/v1/auth/keys?${proofQuery(proof)}`)).status, 403);
        assert.equal((await req('POST', '/v1/auth/session', proof)).status, 201);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
      });

      test('create-key proof on PATCH (loosen) and on a session: 403; used twice to create: second 401', async () => {
        const owner = newAccount();
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        const proof = await createKeyProof(owner);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { ...proof, spend_limit_usdc: null })).status, 403);
        assert.equal((await req('POST', '/v1/auth/session', proof)).status, 403);
        assert.equal((await req('POST', '/v1/auth/keys', proof)).status, 201);
        const again = await req('POST', '/v1/auth/keys', proof);
        assert.equal(again.status, 401, again.text);
        assert.equal(await keyCount(owner), 2);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
      });

      test('loosen-key proof cannot create a key, open a session, list or revoke; replay of a used one is 401', async () => {
        const owner = newAccount();
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        const proof = await siweProof(owner, { action: 'loosen-key' });
        assert.equal((await req('POST', '/v1/auth/keys', proof)).status, 403);
        assert.equal((await req('POST', '/v1/auth/session', proof)).status, 403);
        assert.equal((await req('GET', `/v1/auth/keys?${proofQuery(proof)}`)).status, 403);
        assert.equal((await req('DELETE', `/v1/auth/keys/${id}`, proof)).status, 403);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { ...proof, spend_limit_usdc: 2_000 })).status, 200);
        const replay = await req('PATCH', `/v1/auth/keys/${id}`, { ...proof, spend_limit_usdc: null });
        assert.equal(replay.status, 401, replay.text);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 2_000);
        assert.equal(await keyCount(owner), 1);
      });

      test('a weak proof beside a session header: the proof decides, no loosening, no creation', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const id = (await createKey(owner, { spend_limit_usdc: 1_000, models: ['fake/chat-small'] })).id;
        const manage = await req('PATCH', `/v1/auth/keys/${id}`, { ...(await siweProof(owner, { action: 'manage-keys' })), models: null }, headers);
        assert.equal(manage.status, 403, manage.text);
        const signin = await req('POST', '/v1/auth/keys', await signInProof(owner), headers);
        assert.equal(signin.status, 403, signin.text);
        // A broken or partial proof beside a session never falls back to the session.
        for (const partial of [{ message: '' }, { message: null }, { signature: '0x00' }, { message: null, signature: null }, { message: 1, signature: 2 }]) {
          const r = await req('PATCH', `/v1/auth/keys/${id}`, { ...partial, spend_limit_usdc: 1 }, headers);
          assert.ok(r.status === 401 || r.status === 400, `${JSON.stringify(partial)}: ${r.text}`);
          const c = await req('POST', '/v1/auth/keys', partial, headers);
          assert.ok(c.status === 401 || c.status === 400 || c.status === 403, `${JSON.stringify(partial)}: ${c.text}`);
        }
        assert.equal(await keyCount(owner), 1);
        assert.deepEqual((await limitsOf(id)).allowed_models, ['fake/chat-small']);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
      });

      test("another wallet's loosen proof beside my session only touches the signer's own keys", async () => {
        const victim = newAccount();
        const attacker = newAccount();
        const vid = (await createKey(victim, { spend_limit_usdc: 1_000 })).id;
        const { headers } = await signIn(victim);
        const res = await req('PATCH', `/v1/auth/keys/${vid}`, { ...(await siweProof(attacker, { action: 'loosen-key' })), spend_limit_usdc: null }, headers);
        assert.equal(res.status, 404, res.text);
        assert.equal((await limitsOf(vid)).spend_limit_usdc, 1_000);
      });

      test('an API key, with or without a weak proof, cannot create or loosen', async () => {
        const owner = newAccount();
        const { id, key } = await createKey(owner, { spend_limit_usdc: 1_000 });
        assert.equal((await req('POST', '/v1/auth/keys', {}, bearer(key))).status, 401);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: null }, bearer(key))).status, 401);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: 1 }, bearer(key))).status, 401);
        assert.equal(
          (await req('PATCH', `/v1/auth/keys/${id}`, { ...(await siweProof(owner, { action: 'manage-keys' })), spend_limit_usdc: null }, bearer(key))).status,
          403,
        );
        assert.equal((await req('POST', '/v1/auth/keys', await siweProof(owner, { action: 'manage-keys' }), bearer(key))).status, 403);
        assert.equal((await req('POST', '/v1/auth/keys', {}, { 'x-api-key': key })).status, 401);
        assert.equal(await keyCount(owner), 1);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
      });

      test('a proof in the query string of PATCH or POST is ignored: the session decides', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        const q = proofQuery(await siweProof(owner, { action: 'loosen-key' }));
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}?${q}`, { spend_limit_usdc: null }, headers)).status, 403);
        assert.equal((await req('POST', `/v1/auth/keys?${proofQuery(await createKeyProof(owner))}`, {}, headers)).status, 403);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
        assert.equal(await keyCount(owner), 1);
      });
    });

    describe('PATCH by a session with fields in odd forms', () => {
      test('spend cap: strings, 0, negative, fractional, huge, objects, arrays are 400; raises are 403; key unchanged', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const id = (await createKey(owner, { spend_limit_usdc: 1_000, spend_limit_period: 'total' })).id;
        for (const v of ['2000', '1e9', 0, -1, -0, 1000.5, 1e21, Number.MAX_SAFE_INTEGER + 1, true, [2000], { $gt: 0 }, '', 'null', 'Infinity']) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: v }, headers);
          assert.equal(res.status, 400, `${JSON.stringify(v)}: ${res.text}`);
        }
        for (const v of [1_001, Number.MAX_SAFE_INTEGER, null]) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: v }, headers);
          assert.equal(res.status, 403, `${v}: ${res.text}`);
        }
        assert.deepEqual(await limitsOf(id), {
          spend_limit_usdc: 1_000,
          spend_limit_period: 'total',
          allowed_models: null,
          expires_at: null,
          revoked_at: null,
        });
      });

      test('period: total to day or month with a lower amount is 403; odd spellings 400; null on a day cap tightens to total', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const total = (await createKey(owner, { spend_limit_usdc: 1_000, spend_limit_period: 'total' })).id;
        for (const change of [
          { spend_limit_usdc: 10, spend_limit_period: 'day' },
          { spend_limit_usdc: 999, spend_limit_period: 'month' },
          { spend_limit_period: 'day' },
          { spend_limit_usdc: null, spend_limit_period: null },
          { spend_limit_usdc: null, spend_limit_period: 'total' },
        ]) {
          const res = await req('PATCH', `/v1/auth/keys/${total}`, change, headers);
          assert.equal(res.status, 403, `${JSON.stringify(change)}: ${res.text}`);
        }
        for (const p of ['DAY', 'day ', 'Daily', 'week', 'hour', 1, ['day']]) {
          assert.equal((await req('PATCH', `/v1/auth/keys/${total}`, { spend_limit_period: p }, headers)).status, 400, String(p));
        }
        assert.deepEqual((await limitsOf(total)).spend_limit_period, 'total');
        const daily = (await createKey(owner, { spend_limit_usdc: 1_000, spend_limit_period: 'day' })).id;
        const toTotal = await req('PATCH', `/v1/auth/keys/${daily}`, { spend_limit_period: null }, headers);
        assert.equal(toTotal.status, 200, toTotal.text);
        assert.equal((await limitsOf(daily)).spend_limit_period, 'total');
        // and back is a loosening
        assert.equal((await req('PATCH', `/v1/auth/keys/${daily}`, { spend_limit_period: 'day' }, headers)).status, 403);
        assert.equal((await limitsOf(daily)).spend_limit_period, 'total');
      });

      test('models: [] 400, null 403, duplicates and bare names are the same list, case and unknown 400, a new one 403', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const id = (await createKey(owner, { models: ['fake/chat-small'] })).id;
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { models: [] }, headers)).status, 400);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { models: null }, headers)).status, 403);
        for (const m of [
          ['FAKE/chat-small'],
          ['fake/Chat-Small'],
          ['fake/chat-small '],
          ['fake/*'],
          ['*'],
          ['shared-name'],
          'fake/chat-small',
          [null],
          [''],
          ['fake/chat-small\u0000'],
        ]) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { models: m }, headers);
          assert.equal(res.status, 400, `${JSON.stringify(m)}: ${res.text}`);
        }
        for (const m of [['fake/chat-small', 'fake/thinker'], ['thinker'], ['fake/chat-small', 'other/shared-name'], ['chat-small', 'effort']]) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { models: m }, headers);
          assert.equal(res.status, 403, `${JSON.stringify(m)}: ${res.text}`);
        }
        for (const m of [['fake/chat-small', 'fake/chat-small'], ['chat-small'], ['chat-small', 'fake/chat-small']]) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { models: m }, headers);
          assert.equal(res.status, 200, `${JSON.stringify(m)}: ${res.text}`);
        }
        assert.deepEqual((await limitsOf(id)).allowed_models, ['fake/chat-small']);
      });

      test('expiry: numbers and other forms 400; later in any notation 403; past 400; same instant in another offset 200', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const at = Date.parse('2031-06-15T12:00:00.000Z');
        const id = (await createKey(owner, { expires_at: new Date(at).toISOString() })).id;
        for (const v of [
          at + DAY,
          Math.floor((at + DAY) / 1000),
          String(at + DAY),
          '2031-06-16',
          '2031-06-16T12:00',
          'June 16 2031',
          '2031-06-16T12:00:00.000+25:00',
          '2031-13-01T00:00:00Z',
          true,
          {},
          [],
          '',
        ]) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { expires_at: v }, headers);
          assert.ok(res.status === 400 || res.status === 403, `${JSON.stringify(v)}: ${res.text}`);
        }
        for (const v of ['2031-06-16', '2031-06-15T12:00:00.001Z', '2031-06-15T08:00:01-04:00', '2031-06-15T12:00:01Z', '2099-01-01T00:00:00Z']) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { expires_at: v }, headers);
          assert.equal(res.status, 403, `${v}: ${res.text}`);
        }
        for (const v of ['2000-01-01T00:00:00Z', new Date(Date.now() - 1000).toISOString()]) {
          assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { expires_at: v }, headers)).status, 400, v);
        }
        for (const v of ['2031-06-15T14:00:00+02:00', '2031-06-15T12:00:00.0009Z', '2031-06-15T12:00:00.000999999Z']) {
          const res = await req('PATCH', `/v1/auth/keys/${id}`, { expires_at: v }, headers);
          assert.equal(res.status, 200, `${v}: ${res.text}`);
        }
        assert.equal((await limitsOf(id)).expires_at, at);
      });

      test('an expired key cannot be revived by a session or a manage-keys proof', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        // Long enough for the key to be created before it expires on a loaded machine; then wait it out.
        const expires = new Date(Date.now() + 5_000).toISOString();
        const { id, key } = await createKey(owner, { expires_at: expires });
        await new Promise((r) => setTimeout(r, Date.parse(expires) + 300 - Date.now()));
        const chat = await req('POST', '/v1/chat/completions', { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }, bearer(key));
        assert.equal(chat.status, 401, chat.text);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { expires_at: isoIn(DAY) }, headers)).status, 403);
        assert.equal(
          (await req('PATCH', `/v1/auth/keys/${id}`, { ...(await siweProof(owner, { action: 'manage-keys' })), expires_at: isoIn(DAY) })).status,
          403,
        );
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { expires_at: null }, headers)).status, 403);
        assert.ok((await limitsOf(id)).expires_at! < Date.now());
      });

      test('raw JSON tricks: duplicate keys (last wins), __proto__, constructor, unknown fields', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const id = (await createKey(owner, { spend_limit_usdc: 1_000, models: ['fake/chat-small'] })).id;
        const raw = async (text: string) => {
          const res = await fetch(`${h.gw.url}/v1/auth/keys/${id}`, {
            method: 'PATCH',
            headers: { 'content-type': 'application/json', ...headers },
            body: text,
          });
          const body = await res.text();
          seen.push(body);
          return { status: res.status, text: body };
        };
        for (const text of [
          '{"spend_limit_usdc": 10, "spend_limit_usdc": null}',
          '{"models": ["fake/chat-small"], "models": null}',
          '{"__proto__": {"spend_limit_usdc": null}, "models": ["fake/chat-small"]}',
          '{"constructor": {"prototype": {"spend_limit_usdc": null}}, "models": ["fake/chat-small"]}',
          '{"spend_limit_usdc": 10, "spend_limit_usd": null}',
          '{"spend_limit_usdc": 10, "Spend_Limit_Usdc": null}',
          '{"spend_limit_usdc": 1e400}',
        ]) {
          const res = await raw(text);
          assert.ok(res.status === 400 || res.status === 403, `${text}: ${res.status} ${res.text}`);
        }
        const ct = await fetch(`${h.gw.url}/v1/auth/keys/${id}`, {
          method: 'PATCH',
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
          body: 'spend_limit_usdc=',
        });
        assert.ok(ct.status >= 400 && ct.status < 500, String(ct.status));
        const l = await limitsOf(id);
        assert.equal(l.spend_limit_usdc, 1_000);
        assert.deepEqual(l.allowed_models, ['fake/chat-small']);
      });

      test('a chain of session tightenings never ends looser than the start', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const start = { spend_limit_usdc: 1_000, spend_limit_period: 'month', models: ['fake/chat-small', 'fake/thinker'], expires_at: isoIn(2 * DAY) };
        const id = (await createKey(owner, start)).id;
        const original = await limitsOf(id);
        const steps: Record<string, unknown>[] = [
          { spend_limit_period: 'total' },
          { spend_limit_usdc: 2_000, spend_limit_period: 'day' },
          { spend_limit_period: 'month' },
          { models: ['fake/thinker'] },
          { models: ['fake/chat-small'] },
          { models: ['fake/thinker', 'fake/chat-small'] },
          { expires_at: isoIn(DAY) },
          { expires_at: isoIn(2 * DAY) },
          { spend_limit_usdc: 999 },
          { spend_limit_usdc: 1_000 },
        ];
        for (const s of steps) await req('PATCH', `/v1/auth/keys/${id}`, s, headers);
        const { revoked_at: _r, ...final } = await limitsOf(id);
        const { revoked_at: _o, ...orig } = original;
        assert.deepEqual(loosenedLimits(orig, final), [], JSON.stringify(final));
      });
    });

    describe('sessions and wallets', () => {
      test("a session of wallet A on wallet B's keys: 404 for PATCH and DELETE, B's keys not listed", async () => {
        const a = newAccount();
        const b = newAccount();
        const { headers } = await signIn(a);
        const bid = (await createKey(b, { spend_limit_usdc: 1_000 })).id;
        for (const change of [{ spend_limit_usdc: 1 }, { spend_limit_usdc: null }]) {
          assert.equal((await req('PATCH', `/v1/auth/keys/${bid}`, change, headers)).status, 404);
        }
        assert.equal((await req('DELETE', `/v1/auth/keys/${bid}`, undefined, headers)).status, 404);
        const list = await req('GET', '/v1/auth/keys', undefined, headers);
        assert.equal(list.status, 200);
        assert.deepEqual(list.body.data, []);
        assert.deepEqual(await limitsOf(bid), {
          spend_limit_usdc: 1_000,
          spend_limit_period: 'total',
          allowed_models: null,
          expires_at: null,
          revoked_at: null,
        });
      });

      test('after sign-out the session does nothing; a session never chats; a session cannot open another session', async () => {
        const owner = newAccount();
        const { headers, token } = await signIn(owner);
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        assert.equal((await req('POST', '/v1/auth/session', {}, headers)).status, 401);
        const chat = await req('POST', '/v1/chat/completions', { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }, headers);
        assert.equal(chat.status, 401);
        assert.equal((await req('DELETE', '/v1/auth/session', undefined, headers)).status, 200);
        assert.equal((await req('PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: 1 }, headers)).status, 401);
        assert.equal((await req('GET', '/v1/auth/keys', undefined, headers)).status, 401);
        assert.equal((await req('DELETE', `/v1/auth/keys/${id}`, undefined, headers)).status, 401);
        assert.equal((await req('GET', '/v1/auth/keys', undefined, { authorization: `bearer ${token}` })).status, 401);
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
      });

      test('concurrent session PATCHes (mixed tighten/loosen) never leave the key looser than it started', async () => {
        const owner = newAccount();
        const sessions = await Promise.all([signIn(owner), signIn(owner), signIn(owner)]);
        const id = (
          await createKey(owner, {
            spend_limit_usdc: 1_000,
            spend_limit_period: 'month',
            models: ['fake/chat-small', 'fake/thinker'],
            expires_at: isoIn(3 * DAY),
          })
        ).id;
        const { revoked_at: _o, ...orig } = await limitsOf(id);
        const menu: Record<string, unknown>[] = [
          { spend_limit_usdc: 900 },
          { spend_limit_usdc: 1_100 },
          { spend_limit_period: 'total' },
          { spend_limit_period: 'day' },
          { spend_limit_usdc: 800, spend_limit_period: 'day' },
          { models: ['fake/thinker'] },
          { models: ['fake/chat-small'] },
          { models: ['fake/chat-small', 'fake/thinker'] },
          { models: ['fake/effort'] },
          { expires_at: isoIn(DAY) },
          { expires_at: isoIn(2 * DAY) },
          { expires_at: isoIn(4 * DAY) },
          { spend_limit_usdc: 1_000, spend_limit_period: 'month' },
        ];
        const results = await Promise.all(
          Array.from({ length: 60 }, (_, i) => req('PATCH', `/v1/auth/keys/${id}`, menu[(i * 7) % menu.length], sessions[i % 3]!.headers)),
        );
        for (const r of results) assert.ok([200, 403, 409].includes(r.status), r.text);
        const { revoked_at: _r, ...final } = await limitsOf(id);
        assert.deepEqual(loosenedLimits(orig, final), [], JSON.stringify(final));
      });

      test('the same loosen-key proof sent twice at once changes the key once', async () => {
        const owner = newAccount();
        const id = (await createKey(owner, { spend_limit_usdc: 1_000, models: ['fake/chat-small'] })).id;
        const proof = await siweProof(owner, { action: 'loosen-key' });
        const [r1, r2] = await Promise.all([
          req('PATCH', `/v1/auth/keys/${id}`, { ...proof, spend_limit_usdc: null }),
          req('PATCH', `/v1/auth/keys/${id}`, { ...proof, models: null }),
        ]);
        assert.deepEqual([r1.status, r2.status].sort(), [200, 401], `${r1.text} ${r2.text}`);
        const l = await limitsOf(id);
        assert.ok(l.spend_limit_usdc === null ? l.allowed_models !== null : l.allowed_models === null, JSON.stringify(l));
      });

      test('the same create-key proof sent five times at once makes one key', async () => {
        const owner = newAccount();
        const proof = await createKeyProof(owner);
        const results = await Promise.all(Array.from({ length: 5 }, () => req('POST', '/v1/auth/keys', proof)));
        assert.deepEqual(results.map((r) => r.status).sort(), [201, 401, 401, 401, 401]);
        assert.equal(await keyCount(owner), 1);
      });

      test('a create-key or loosen-key proof misrouted to a GET (403, nonce kept) is not written to the logs', async () => {
        const owner = newAccount();
        const create = await createKeyProof(owner);
        const loosen = await siweProof(owner, { action: 'loosen-key' });
        for (const p of [create, loosen]) {
          assert.equal((await req('GET', `/v1/auth/keys?${proofQuery(p)}`)).status, 403);
          assert.equal((await req('GET', `/v1/usage/${owner.address}?${proofQuery(p)}`)).status, 403);
          assert.equal((await req('GET', `/v1/topups/${owner.address}?${proofQuery(p)}`)).status, 403);
        }
        const logs = h.gw.logs();
        for (const p of [create, loosen]) {
          assert.ok(!logs.includes(p.signature.slice(2, 60)), 'a still-usable proof signature is in the logs');
          assert.ok(!logs.includes(encodeURIComponent(p.signature).slice(2, 60)), 'a still-usable proof signature is in the logs (encoded)');
        }
      });

      test('other methods, paths and overrides: no loosening and no key by any route', async () => {
        const owner = newAccount();
        const { headers } = await signIn(owner);
        const id = (await createKey(owner, { spend_limit_usdc: 1_000 })).id;
        const loosen = { spend_limit_usdc: null };
        const tries: [string, string, Record<string, string>][] = [
          ['PUT', `/v1/auth/keys/${id}`, {}],
          ['POST', `/v1/auth/keys/${id}`, {}],
          ['PATCH', `/v1/auth/keys/%3${String(id).slice(-1)}`, {}],
          ['PATCH', `/v1/auth/keys/${id}/`, {}],
          ['PATCH', `/v1//auth/keys/${id}`, {}],
          ['PATCH', `/V1/AUTH/KEYS/${id}`, {}],
          ['PATCH', `/v1/auth/keys/0${id}`, {}],
          ['POST', `/v1/auth/keys/${id}`, { 'x-http-method-override': 'PATCH' }],
          ['POST', '/v1/auth/keys', { 'x-http-method-override': 'PATCH' }],
          ['PATCH', '/v1/auth/keys', {}],
        ];
        for (const [method, path, extra] of tries) {
          const res = await req(method, path, loosen, { ...headers, ...extra });
          assert.ok(res.status >= 400, `${method} ${path}: ${res.status} ${res.text}`);
        }
        assert.equal((await limitsOf(id)).spend_limit_usdc, 1_000);
        assert.equal(await keyCount(owner), 1);
      });

      test('a session never reaches /v1/responses or /v1/messages', async () => {
        const owner = newAccount();
        const { headers, token } = await signIn(owner);
        const r = await req('POST', '/v1/responses', { model: 'fake/chat-small', input: 'hi' }, headers);
        assert.equal(r.status, 401, r.text);
        const m = await req(
          'POST',
          '/v1/messages',
          { model: 'fake/chat-small', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] },
          { 'x-api-key': token },
        );
        assert.ok(m.status === 401 || m.status === 404, m.text);
      });

      test('no error message carries a session token, an API key secret or the key secret', async () => {
        const owner = newAccount();
        const { token, headers } = await signIn(owner);
        const { id, key } = await createKey(owner, { spend_limit_usdc: 1_000 });
        await req('PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: null }, headers);
        await req('POST', '/v1/auth/keys', { label: key }, headers);
        await req('PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: null, message: token, signature: '0x1' }, headers);
        await req('GET', `/v1/auth/keys?message=${encodeURIComponent(key)}&signature=0x01`, undefined, headers);
        await req('GET', '/v1/auth/keys', undefined, { authorization: `Bearer ${token.slice(0, -1)}A` });
        await req('GET', '/v1/auth/keys', undefined, { authorization: `Bearer ${key}` });
        const list = await req('GET', '/v1/auth/keys', undefined, headers);
        assert.ok(!list.text.includes(key), 'the key list shows the secret');
        const secretHex = h.gw.services.keySecret.toString('hex');
        for (const text of seen) {
          assert.ok(!text.includes(secretHex), 'the key secret leaked');
          assert.ok(!/ses-[A-Za-z0-9_-]{43}/.test(text) || text.includes('"token"'), `a session token in: ${text.slice(0, 300)}`);
        }
        const logs = h.gw.logs();
        assert.ok(!logs.includes(token), 'session token in logs');
        assert.ok(!logs.includes(key), 'API key in logs');
      });
    });
  });
}

for (const engine of ENGINES) suite(engine);
