import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import pg from 'pg';
import type { PrivateKeyAccount } from 'viem/accounts';
import { loosenedLimits } from '../../src/keys/limit-direction.ts';
import { limitsFromColumns } from '../../src/keys/key-limits.ts';
import type { KeyLimits } from '../../src/keys/limits.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, newAccount, signInProof, siweProof } from '../support/siwe.ts';
import { until } from '../support/until.ts';

/**
 * Attacks on session and proof scope across two gateway instances sharing one PostgreSQL: sessions and proofs used
 * across instances, and tightenings decided on stale reads of the model list and the expiry.
 */
const DAY = 86_400_000;
const isoIn = (ms: number) => new Date(Date.now() + ms).toISOString();

describe('attack: session scope across two instances on PostgreSQL', () => {
  let a: ChatHarness;
  let b: ChatHarness;
  let owner: pg.Client;
  let observer: pg.Client;
  before(async () => {
    const databaseUrl = await freshDatabaseUrl('postgres');
    a = await startChatHarness('postgres', {}, { databaseUrl });
    b = await startChatHarness('postgres', {}, { databaseUrl });
    [owner, observer] = [new pg.Client({ connectionString: databaseUrl }), new pg.Client({ connectionString: databaseUrl })];
    await Promise.all([owner.connect(), observer.connect()]);
  });
  afterEach(() => a.gw.assertLedger());
  after(async () => {
    await Promise.all([owner?.end(), observer?.end()]);
    await a?.stop();
    await b?.stop();
  });

  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  async function signIn(h: ChatHarness, account: PrivateKeyAccount) {
    const res = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(account));
    assert.equal(res.status, 201, res.text);
    return bearer(res.body.token);
  }
  async function createKey(h: ChatHarness, account: PrivateKeyAccount, limits: Record<string, unknown> = {}) {
    const res = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), ...limits });
    assert.equal(res.status, 201, res.text);
    return res.body.id as number;
  }
  async function limitsOf(id: number): Promise<KeyLimits> {
    const row = await a.gw.services.storage.db
      .selectFrom('api_keys')
      .select(['spend_limit_usdc', 'spend_limit_period', 'allowed_models', 'expires_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    return limitsFromColumns(row as never);
  }
  const keyCount = async (account: PrivateKeyAccount) =>
    (await a.gw.services.storage.db.selectFrom('api_keys').select('id').where('wallet', '=', account.address.toLowerCase()).execute()).length;

  test('a session opened on A cannot create or loosen on B; signed out on A, refused on B at once', async () => {
    const acct = newAccount();
    const session = await signIn(a, acct);
    const id = await createKey(a, acct, { spend_limit_usdc: 1_000 });
    assert.equal((await call(b.gw.url, 'POST', '/v1/auth/keys', {}, session)).status, 403);
    assert.equal((await call(b.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: null }, session)).status, 403);
    assert.equal((await call(b.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: 900 }, session)).status, 200);
    assert.equal((await call(a.gw.url, 'DELETE', '/v1/auth/session', undefined, session)).status, 200);
    assert.equal((await call(b.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: 800 }, session)).status, 401);
    assert.equal((await call(b.gw.url, 'GET', '/v1/auth/keys', undefined, session)).status, 401);
    assert.equal((await limitsOf(id)).spend_limit_usdc, 900);
    assert.equal(await keyCount(acct), 1);
  });

  test('one create-key proof sent to both instances at once makes one key; one loosen proof loosens once', async () => {
    const acct = newAccount();
    const proof = await createKeyProof(acct);
    const created = await Promise.all([a, b, a, b].map((h) => call(h.gw.url, 'POST', '/v1/auth/keys', proof)));
    assert.deepEqual(created.map((r) => r.status).sort(), [201, 401, 401, 401]);
    assert.equal(await keyCount(acct), 1);
    const id = created.find((r) => r.status === 201)!.body.id as number;
    await call(a.gw.url, 'PATCH', `/v1/auth/keys/${id}`, {
      ...(await siweProof(acct, { action: 'manage-keys' })),
      spend_limit_usdc: 10,
      models: ['fake/chat-small'],
    });
    const loosen = await siweProof(acct, { action: 'loosen-key' });
    const r = await Promise.all([
      call(a.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { ...loosen, spend_limit_usdc: null }),
      call(b.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { ...loosen, models: null }),
    ]);
    assert.deepEqual(r.map((x) => x.status).sort(), [200, 401], r.map((x) => x.text).join(' '));
    const l = await limitsOf(id);
    assert.equal((l.spend_limit_usdc === null ? 1 : 0) + (l.allowed_models === null ? 1 : 0), 1, JSON.stringify(l));
  });

  test('many sessions on both instances PATCHing at once never leave the key looser than it started', async () => {
    const acct = newAccount();
    const sessions = [await signIn(a, acct), await signIn(b, acct), await signIn(a, acct), await signIn(b, acct)];
    const id = await createKey(a, acct, {
      spend_limit_usdc: 1_000,
      spend_limit_period: 'month',
      models: ['fake/chat-small', 'fake/thinker'],
      expires_at: isoIn(3 * DAY),
    });
    const orig = await limitsOf(id);
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
      { spend_limit_usdc: 950, models: ['fake/thinker'] },
      { spend_limit_usdc: 990, spend_limit_period: 'total', expires_at: isoIn(2.5 * DAY) },
    ];
    const statuses = new Map<number, number>();
    for (let round = 0; round < 3; round++) {
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          call((i % 2 ? a : b).gw.url, 'PATCH', `/v1/auth/keys/${id}`, menu[(i * 7 + round * 3) % menu.length], sessions[i % 4]!),
        ),
      );
      for (const r of results) {
        assert.ok([200, 403, 409].includes(r.status), r.text);
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      }
    }
    const final = await limitsOf(id);
    assert.deepEqual(loosenedLimits(orig, final), [], JSON.stringify({ final, statuses: [...statuses] }));
  });

  for (const [what, start, ownerSql, ownerParam, sessionChange] of [
    [
      'model list',
      { models: ['fake/chat-small', 'fake/thinker'] },
      'UPDATE api_keys SET allowed_models = $2 WHERE id = $1',
      JSON.stringify(['fake/chat-small']),
      { models: ['fake/thinker'] },
    ],
    ['expiry', { expires_at: isoIn(3 * DAY) }, 'UPDATE api_keys SET expires_at = $2 WHERE id = $1', String(Date.now() + DAY), { expires_at: isoIn(2 * DAY) }],
    [
      'period',
      { spend_limit_usdc: 1_000, spend_limit_period: 'day' },
      'UPDATE api_keys SET spend_limit_period = $2 WHERE id = $1',
      'total',
      { spend_limit_period: 'month' },
    ],
  ] as const) {
    test(`a session's ${what} tightening decided on a stale read cannot land on the owner's tighter ${what}`, async () => {
      const acct = newAccount();
      const id = await createKey(a, acct, start as Record<string, unknown>);
      const session = await signIn(b, acct);
      const before = await limitsOf(id);
      await owner.query('BEGIN');
      await owner.query(ownerSql, [id, ownerParam]);
      const patch = call(b.gw.url, 'PATCH', `/v1/auth/keys/${id}`, sessionChange, session);
      await until(
        async () => (await observer.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'")).rowCount! > 0,
        'the session waiting on the row',
      );
      await owner.query('COMMIT');
      const res = await patch;
      const after = await limitsOf(id);
      const ownerState = { ...before };
      // What the owner wrote, then what the session's change on it would loosen.
      const written = await owner.query('SELECT spend_limit_usdc, spend_limit_period, allowed_models, expires_at FROM api_keys WHERE id = $1', [id]);
      assert.ok(written.rowCount === 1);
      assert.equal(res.status, 403, `${res.status} ${res.text} -> ${JSON.stringify(after)} (was ${JSON.stringify(ownerState)})`);
    });
  }
});
