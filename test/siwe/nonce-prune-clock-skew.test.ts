import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { pruneNonces } from '../../src/siwe/nonce-store.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, newAccount, proofQuery, siweProof } from '../support/siwe.ts';

/**
 * A used SIWE nonce expires at max(issuedAt, verifier's now) + window + skew, by the clock of the
 * instance that verified it; the pruning job deletes rows by the clock of whichever instance runs it.
 * Without a margin, an instance whose clock ran more than clockSkewSeconds (60 s) ahead pruned a
 * nonce that a slower instance still accepted the message of (valid until issuedAt + window by its
 * own clock), and the proof was replayed. Pruning now keeps an hour past the expiry (nonce-store.ts).
 */
describe('attack: a used SIWE proof replayed after another instance pruned its nonce', () => {
  let h: ChatHarness;
  let offsetMs = 0;
  before(async () => {
    h = await startChatHarness('sqlite', {}, { now: () => Date.now() + offsetMs });
  });
  after(() => h.stop());

  test('a manage-keys proof listed once, pruned by an instance 121 s ahead, lists again', async () => {
    const owner = newAccount();
    assert.equal((await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(owner))).status, 201);
    const issuedAt = new Date();
    const proof = await siweProof(owner, { action: 'manage-keys', issuedAt });
    const first = await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(proof)}`);
    assert.equal(first.status, 200, first.text);
    const replayNow = await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(proof)}`);
    assert.equal(replayNow.status, 401, 'a replay at once is refused (control)');

    // 250 s later on this instance (still inside the 300 s window), another instance whose clock
    // is 121 s ahead runs the every-minute pruning job.
    offsetMs = 250_000;
    const pruned = await pruneNonces(h.gw.services.storage.db, issuedAt.getTime() + 250_000 + 121_000);
    const replay = await call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(proof)}`);
    assert.equal(pruned, 0, 'the fast instance kept the used nonce');
    assert.equal(replay.status, 401, `a used proof was accepted a second time: ${replay.text.slice(0, 120)}`);
  });
});
