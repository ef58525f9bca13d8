import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Libsql from 'libsql';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { assertOutageAnswer, chatBody } from './support.ts';

/**
 * SQLite's outage is a write lock another process (an admin command, a backup) holds beyond
 * busy_timeout: the request is refused with 503 and Retry-After, not 500, and nothing is reserved.
 * (Known limit, reported separately: libsql leaves a statement that failed with SQLITE_BUSY active,
 * and an active write statement blocks later COMMITs until it is run again.)
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
    const other = new Libsql(h.gw.config.database.url.slice('sqlite:'.length));
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
});
