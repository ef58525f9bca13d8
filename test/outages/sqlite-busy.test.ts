import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Sqlite from 'better-sqlite3';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { newAccount, createKeyProof } from '../support/siwe.ts';
import { assertOutageAnswer, chatBody } from './support.ts';

/**
 * SQLite's outage is a write lock another process (an admin command, a backup) holds beyond
 * busy_timeout: the request is refused with 503 and Retry-After, not 500, and nothing is reserved.
 * A statement that failed with SQLITE_BUSY must not stay "in progress": while one is, every later
 * COMMIT on the connection fails (libsql, the former driver, left them so); the second test shows
 * the gateway writes again once the lock is released.
 */
describe('SQLite write lock held elsewhere', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  after(() => h?.stop());

  test('a chat that cannot take the write lock within busy_timeout gets 503, and nothing stays reserved', async () => {
    const w = await h.wallet(1_000_000);
    const auth = { authorization: `Bearer ${w.key}` };
    const other = new Sqlite(h.gw.config.database.url.slice('sqlite:'.length));
    other.exec('BEGIN IMMEDIATE');
    try {
      assertOutageAnswer(await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth), 'database', 'chat while the lock is held');
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    assert.equal(h.fake.received.length, 0, 'the provider was not called');
    assert.equal((await h.balance(w.account)).locked_usdc, 0);
    await h.gw.assertLedger();
  });

  test('writes that failed on the held lock do not break later commits: once it is released, chats and key creation succeed', async () => {
    const w = await h.wallet(1_000_000);
    const auth = { authorization: `Bearer ${w.key}` };
    const other = new Sqlite(h.gw.config.database.url.slice('sqlite:'.length));
    other.exec('BEGIN IMMEDIATE');
    try {
      // Key creation writes through Kysely (a deferred transaction, so its INSERT is what meets
      // the lock), and the chat through the group commit: both statements fail with SQLITE_BUSY.
      assertOutageAnswer(await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(newAccount())), 'database', 'key creation while the lock is held');
      assertOutageAnswer(await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth), 'database', 'chat while the lock is held');
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    for (let i = 0; i < 3; i++) {
      const chat = await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth);
      assert.equal(chat.status, 200, `chat ${i} after the lock was released: ${chat.text}`);
    }
    const created = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(newAccount()));
    assert.equal(created.status, 201, created.text);
    const usage = await h.gw.services.storage.db
      .selectFrom('request_usage')
      .select('request_id')
      .where('wallet', '=', w.account.address.toLowerCase())
      .execute();
    assert.equal(usage.length, 3, 'each answered chat billed once');
    assert.equal((await h.balance(w.account)).locked_usdc, 0);
    await h.gw.assertLedger();
  });
});
