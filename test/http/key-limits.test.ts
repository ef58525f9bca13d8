import assert from 'node:assert/strict';
import { TEST_ORIGIN } from '../support/origin.ts';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES, tempDir } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { runTollgate } from '../support/cli.ts';
import { newAccount, proofQuery, siweProof, createKeyProof } from '../support/siwe.ts';
import type { PrivateKeyAccount } from 'viem/accounts';

/** Per-key spend limits, model lists and expiry through the API and both CLIs. */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 };

for (const engine of ENGINES) {
  describe(`key limits over the API (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine);
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const create = async (account: PrivateKeyAccount, extra: Record<string, unknown>) =>
      call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), ...extra });
    const patch = async (account: PrivateKeyAccount, id: number, extra: Record<string, unknown>) =>
      call(h.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { ...(await siweProof(account, { action: 'loosen-key' })), ...extra });
    const list = async (account: PrivateKeyAccount) => (await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(await siweProof(account))}`)).body.data;
    const chat = (key: string, body: Record<string, unknown> = BODY) =>
      call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${key}` });

    test('create takes a limit, a model list (bare names resolved) and an expiry, and shows them back', async () => {
      const account = newAccount();
      const expires = '2099-01-31T00:00:00Z';
      const res = await create(account, {
        spend_limit_usdc: 2_000_000,
        spend_limit_period: 'day',
        models: ['chat-small', 'fake/thinker'],
        expires_at: expires,
      });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.spend_limit_usdc, 2_000_000);
      assert.equal(res.body.spend_limit_period, 'day');
      assert.deepEqual(res.body.models, ['fake/chat-small', 'fake/thinker']);
      assert.equal(res.body.expires_at, '2099-01-31T00:00:00.000Z');
      const [listed] = await list(account);
      assert.equal(listed.spend_usdc, 0);
      assert.equal(listed.reserved_usdc, 0);
      const midnight = new Date();
      midnight.setUTCHours(24, 0, 0, 0);
      assert.equal(listed.spend_resets_at, midnight.toISOString());
      const plain = await create(account, {});
      assert.deepEqual(Object.keys(plain.body).sort(), ['created_at', 'id', 'key', 'label'], 'a key without limits answers as before');
    });

    test('bad limit fields are 400 naming the problem, before the proof is used', async () => {
      const account = newAccount();
      const cases: [Record<string, unknown>, RegExp][] = [
        [{ spend_limit_usdc: 0 }, /spend_limit_usdc must be a positive whole number/],
        [{ spend_limit_usdc: 1.5 }, /spend_limit_usdc/],
        [{ spend_limit_usdc: '100' }, /spend_limit_usdc/],
        [{ spend_limit_usdc: 100, spend_limit_period: 'week' }, /spend_limit_period must be one of total, day, month/],
        [{ spend_limit_period: 'day' }, /spend_limit_period needs spend_limit_usdc/],
        [{ models: ['nope/one', 'chat-small', 'ghost'] }, /unknown models "nope\/one", "ghost"/],
        [{ models: ['shared-name'] }, /offered by several providers; use the full id/],
        [{ models: [] }, /models must be a list of 1 to 100/],
        [{ expires_at: '2001-01-01T00:00:00Z' }, /not in the future/],
        [{ expires_at: 'tomorrow' }, /expires_at must be an ISO 8601 time/],
        [{ expires_at: '2099-01-01T00:00:00' }, /expires_at must be an ISO 8601 time/],
      ];
      for (const [fields, message] of cases) {
        const proof = await createKeyProof(account);
        const res = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...proof, ...fields });
        assert.equal(res.status, 400, `${JSON.stringify(fields)}: ${res.text}`);
        assert.equal(res.body.error, 'VALIDATION_ERROR');
        assert.match(res.body.message, message);
        assert.equal((await call(h.gw.url, 'POST', '/v1/auth/keys', proof)).status, 201, 'the refused request did not use the proof');
      }
    });

    test('PATCH changes and clears limits; unknown fields, empty changes and revoked keys are refused', async () => {
      const account = newAccount();
      const { id } = (await create(account, { spend_limit_usdc: 1_000 })).body;
      const changed = await patch(account, id, { spend_limit_period: 'month', models: ['fake/thinker'], expires_at: '2098-05-01' });
      assert.equal(changed.status, 200, changed.text);
      assert.equal(changed.body.spend_limit_usdc, 1_000);
      assert.equal(changed.body.spend_limit_period, 'month');
      assert.deepEqual(changed.body.models, ['fake/thinker']);
      assert.equal(changed.body.expires_at, '2098-05-01T00:00:00.000Z');
      assert.ok(Date.parse(changed.body.spend_resets_at) > Date.now());
      const cleared = await patch(account, id, { spend_limit_usdc: null, models: null, expires_at: null });
      assert.equal(cleared.status, 200);
      assert.deepEqual(
        [cleared.body.spend_limit_usdc, cleared.body.spend_limit_period, cleared.body.models, cleared.body.expires_at, cleared.body.spend_resets_at],
        [null, null, null, null, null],
      );
      assert.match((await patch(account, id, { spend_limit: 5 })).body.message, /spend_limit/);
      assert.match((await patch(account, id, {})).body.message, /send at least one of/);
      assert.equal((await call(h.gw.url, 'DELETE', `/v1/auth/keys/${id}`, await siweProof(account))).status, 200);
      const revoked = await patch(account, id, { spend_limit_usdc: 5 });
      assert.equal(revoked.status, 400);
      assert.match(revoked.body.message, /revoked/);
    });

    test('the limit refuses with 402 KEY_LIMIT_EXCEEDED before the provider; spend shows in the list', async () => {
      h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
      const w = await h.wallet(10_000_000);
      const probe = await patch(w.account, w.keyId, { spend_limit_usdc: 1, spend_limit_period: 'day' });
      assert.equal(probe.status, 200);
      const before = h.fake.received.length;
      for (const stream of [false, true]) {
        const refused = await chat(w.key, { ...BODY, stream });
        assert.equal(refused.status, 402, refused.text);
        assert.match(refused.headers.get('content-type') ?? '', /application\/json/, 'a plain JSON answer, not a stream');
        assert.equal(refused.body.error, 'KEY_LIMIT_EXCEEDED');
        assert.equal(refused.body.limit_usdc, 1);
        assert.equal(refused.body.spent_usdc, 0);
        assert.equal(refused.body.period, 'day');
        assert.match(refused.body.message, /daily \(UTC\) spend limit of 1 micro-USDC/);
        assert.match(refused.body.message, new RegExp(`resets at ${refused.body.resets_at}`));
      }
      assert.equal(h.fake.received.length, before, 'nothing went upstream');
      const required = (await chat(w.key)).body.required_usdc as number;
      assert.equal((await patch(w.account, w.keyId, { spend_limit_usdc: required })).status, 200);
      assert.equal((await chat(w.key)).status, 200);
      const charge = Math.ceil(10 * 1.2 + 10 * 2.4);
      const [after] = await list(w.account);
      assert.equal(after.spend_usdc, charge);
      assert.equal(after.reserved_usdc, 0);
      const total = await patch(w.account, w.keyId, { spend_limit_period: 'total' });
      assert.equal(total.body.spend_usdc, charge, 'a limit set later sees the spend already made');
      assert.equal(total.body.spend_resets_at, null);
      h.fake.behaviour = {};
    });

    test('/v1/models still lists every model for a restricted key (it is public)', async () => {
      const res = await call(h.gw.url, 'GET', '/v1/models');
      assert.equal(res.status, 200);
      assert.ok(res.body.data.length >= 5);
    });
  });
}

describe('key limits from the command line', () => {
  let h: ChatHarness;
  let configPath: string;
  before(async () => {
    h = await startChatHarness('sqlite');
    configPath = join(tempDir(), 'tollgate.yaml');
    const models = h.gw.config.models
      .map((m) => `  - {provider: ${m.provider}, name: ${m.name}, contextLength: ${m.contextLength}, promptCostPer1M: "1", completionCostPer1M: "1"}`)
      .join('\n');
    writeFileSync(
      configPath,
      `database:\n  url: "${h.gw.config.database.url}"\nserver:\n  publicUrl: http://gateway.test\nproviders:\n  fake: {baseUrl: "${h.fake.url}"}\n  other: {baseUrl: "${h.fake.url}"}\nmodels:\n${models}\n`,
    );
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('tollgate wallet keys create|update set the limits over the API', async () => {
    const privateKey = generatePrivateKey();
    const env = { TOLLGATE_WALLET_KEY: privateKey };
    const created = await runTollgate(
      [
        'wallet',
        '--gateway',
        h.gw.url,
        '--siwe-domain',
        new URL(TEST_ORIGIN).host,
        '--json',
        'keys',
        'create',
        '--label',
        'agent',
        '--limit-usd',
        '2.5',
        '--period',
        'month',
        '--models',
        'chat-small',
      ],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    const key = JSON.parse(created.stdout);
    assert.equal(key.spend_limit_usdc, 2_500_000);
    assert.equal(key.spend_limit_period, 'month');
    assert.deepEqual(key.models, ['fake/chat-small']);
    const updated = await runTollgate(
      [
        'wallet',
        '--gateway',
        h.gw.url,
        '--siwe-domain',
        new URL(TEST_ORIGIN).host,
        'keys',
        'update',
        String(key.id),
        '--limit-usd',
        'none',
        '--models',
        'all',
        '--expires',
        '2097-03-04T05:06:07Z',
      ],
      env,
    );
    assert.equal(updated.code, 0, updated.stderr);
    assert.match(updated.stdout, /^updated key \d+\nlimit      none\nmodels     all\nexpires    2097-03-04T05:06:07\.000Z\nspent      \$0\.000000 in total\n$/);
    const bad = await runTollgate(
      ['wallet', '--gateway', h.gw.url, '--siwe-domain', new URL(TEST_ORIGIN).host, 'keys', 'update', String(key.id), '--models', 'ghost'],
      env,
    );
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /VALIDATION_ERROR: models: unknown model "ghost"/);
    const row = await h.gw.services.storage.db.selectFrom('api_keys').select(['wallet', 'expires_at']).where('id', '=', key.id).executeTakeFirstOrThrow();
    assert.equal(row.wallet, privateKeyToAccount(privateKey).address.toLowerCase());
  });

  test('tollgate admin keys show|limit let support read and change any key', async () => {
    const w = await h.wallet(5_000_000);
    assert.equal((await call(h.gw.url, 'POST', '/v1/chat/completions', BODY, { authorization: `Bearer ${w.key}` })).status, 200);
    const limited = await runTollgate([
      '--config',
      configPath,
      'admin',
      'keys',
      'limit',
      String(w.keyId),
      '--limit-usd',
      '1',
      '--period',
      'day',
      '--models',
      'fake/chat-small,thinker',
    ]);
    assert.equal(limited.code, 0, limited.stderr);
    assert.match(limited.stdout, /^changed key #\d+\n/);
    assert.match(limited.stdout, /limit      \$1\.000000 per day \(UTC\)\nmodels     fake\/chat-small, fake\/thinker\nexpires    never\n/);
    const shown = await runTollgate(['--config', configPath, 'admin', 'keys', 'show', String(w.keyId)]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, new RegExp(`wallet     ${w.account.address.toLowerCase()}`));
    assert.match(shown.stdout, /status     active/);
    assert.match(shown.stdout, /spent      \$0\.0000\d\d this period \(\$0\.000000 reserved in flight\), resets \d{4}-/);
    const refused = await runTollgate(['--config', configPath, 'admin', 'keys', 'limit', String(w.keyId), '--period', 'week']);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /--period must be total, day or month/);
    const unknown = await runTollgate(['--config', configPath, 'admin', 'keys', 'show', '987654']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no API key #987654/);
    // The new model list applies on the gateway (its key cache is dropped within 5 s; this one never cached it past the PATCH).
    h.gw.services.keyCache.forget(w.keyId);
    const other = await call(h.gw.url, 'POST', '/v1/chat/completions', { ...BODY, model: 'fake/effort' }, { authorization: `Bearer ${w.key}` });
    assert.equal(other.status, 403);
    assert.equal(other.body.error, 'MODEL_NOT_ALLOWED');
  });
});
