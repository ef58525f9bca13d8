import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { loosenedLimits } from '../../src/keys/limit-direction.ts';
import { NO_LIMITS, type KeyLimits } from '../../src/keys/limits.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, newAccount, signInProof } from '../support/siwe.ts';
import { until } from '../support/until.ts';

/**
 * A dashboard session may only tighten a key. "Tighter" is decided field by field
 * against the key's limits as they are when the change is written, not as a request read them: a
 * tightening decided on a stale read must not land on limits the owner lowered meanwhile.
 */
const limits = (l: Partial<KeyLimits>): KeyLimits => ({ ...NO_LIMITS, ...l });

describe('which changes loosen a key', () => {
  const cases: [string, Partial<KeyLimits>, Partial<KeyLimits>, string[]][] = [
    ['a first cap', {}, { spend_limit_usdc: 5, spend_limit_period: 'total' }, []],
    ['a lower cap', { spend_limit_usdc: 10, spend_limit_period: 'day' }, { spend_limit_usdc: 5, spend_limit_period: 'day' }, []],
    ['a higher cap', { spend_limit_usdc: 10, spend_limit_period: 'day' }, { spend_limit_usdc: 11, spend_limit_period: 'day' }, ['spend_limit_usdc']],
    ['no cap', { spend_limit_usdc: 10, spend_limit_period: 'total' }, {}, ['spend_limit_usdc']],
    ['day to month to total', { spend_limit_usdc: 10, spend_limit_period: 'day' }, { spend_limit_usdc: 10, spend_limit_period: 'month' }, []],
    ['total to month', { spend_limit_usdc: 10, spend_limit_period: 'total' }, { spend_limit_usdc: 10, spend_limit_period: 'month' }, ['spend_limit_usdc']],
    [
      'a lower cap that resets more often',
      { spend_limit_usdc: 10, spend_limit_period: 'month' },
      { spend_limit_usdc: 1, spend_limit_period: 'day' },
      ['spend_limit_usdc'],
    ],
    ['a first model list', {}, { allowed_models: ['a'] }, []],
    ['fewer models', { allowed_models: ['a', 'b'] }, { allowed_models: ['b'] }, []],
    ['another model', { allowed_models: ['a'] }, { allowed_models: ['b'] }, ['models']],
    ['no model list', { allowed_models: ['a'] }, {}, ['models']],
    ['a first expiry', {}, { expires_at: 5 }, []],
    ['an earlier expiry', { expires_at: 10 }, { expires_at: 5 }, []],
    ['a later expiry', { expires_at: 10 }, { expires_at: 11 }, ['expires_at']],
    ['no expiry', { expires_at: 10 }, {}, ['expires_at']],
    [
      'everything at once',
      { spend_limit_usdc: 10, spend_limit_period: 'total', allowed_models: ['a'], expires_at: 10 },
      {},
      ['spend_limit_usdc', 'models', 'expires_at'],
    ],
  ];
  for (const [what, before, after, loosened] of cases) {
    test(`${what}: ${loosened.length ? `loosens ${loosened.join(', ')}` : 'tightens'}`, () => {
      assert.deepEqual(loosenedLimits(limits(before), limits(after)), loosened);
    });
  }
});

// PostgreSQL runs requests side by side (READ COMMITTED); SQLite writes one transaction at a time,
// so only PostgreSQL can interleave a stale read with another writer.
describe('attack: a session tightening on a stale read loosens a limit the owner lowered meanwhile (postgres)', () => {
  let h: ChatHarness;
  // The owner's own connection, and one that watches who waits for a lock.
  let owner: pg.Client;
  let observer: pg.Client;
  before(async () => {
    h = await startChatHarness('postgres');
    [owner, observer] = [new pg.Client({ connectionString: h.gw.config.database.url }), new pg.Client({ connectionString: h.gw.config.database.url })];
    await Promise.all([owner.connect(), observer.connect()]);
  });
  after(async () => {
    await Promise.all([owner?.end(), observer?.end()]);
    await h?.stop();
  });

  test("the session's 500 is decided again on the owner's 100, refused as a loosening, and the key keeps 100", async () => {
    const account = newAccount();
    const created = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), spend_limit_usdc: 1_000 });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as number;
    const session = (await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(account))).body.token as string;

    // The owner's lower cap, written but not committed yet: it holds the row.
    await owner.query('BEGIN');
    await owner.query('UPDATE api_keys SET spend_limit_usdc = 100 WHERE id = $1', [id]);
    // The session reads 1 000 (the committed value), decides 500 tightens, and waits on the row.
    const patch = call(h.gw.url, 'PATCH', `/v1/auth/keys/${id}`, { spend_limit_usdc: 500 }, { authorization: `Bearer ${session}` });
    await until(
      async () => (await observer.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'")).rowCount! > 0,
      'the session waiting on the row',
    );
    await owner.query('COMMIT');

    const res = await patch;
    assert.equal(res.status, 403, res.text);
    assert.match(res.body.message, /loosens spend_limit_usdc/);
    const row = await h.gw.services.storage.db.selectFrom('api_keys').select('spend_limit_usdc').where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(Number(row.spend_limit_usdc), 100, "the owner's lower cap stands");
  });
});
