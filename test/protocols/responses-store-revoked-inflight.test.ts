import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, signInProof } from '../support/siwe.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };

/**
 * The follow-up of responses-store-revoked-key.test.ts (fa4a93f: revoking a key deletes the
 * responses it stored). The deletion runs once, at the revoke; a request the key started before it
 * is still under way and stores its response when it ends, under the revoked key: unreachable by
 * every key of the wallet, undeletable, and counted against the wallet's store for its whole TTL.
 * A contractor who expects to be revoked keeps maxStoredPerWallet slow requests open, and the
 * owner's revoke leaves the wallet's store full again for the TTL, exactly what the fix removed.
 */
describe("attack: a revoked key's requests still under way store responses nobody can reach (sqlite)", () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', {
      keys: { lookupCacheSeconds: 0 },
      responses: { store: { ttlSeconds: 3600, maxStoredPerWallet: 2 } },
    });
    h.fake.behaviour = { usage: USAGE };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  const post = (key: string, body: Record<string, unknown> = {}) =>
    fetch(`${h.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', input: 'hi', ...body }),
    });
  const byKey = (key: string, id: string, method: 'GET' | 'DELETE') =>
    fetch(`${h.gw.url}/v1/responses/${id}`, { method, headers: { authorization: `Bearer ${key}` } });

  test("responses the revoked key's in-flight requests store after the revoke keep the wallet's store full", async () => {
    const w = await h.wallet(FUNDS);
    const created = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(w.account));
    assert.equal(created.status, 201, created.text);
    const ownerKey = created.body.key as string;

    // The contractor's key (w.key) has two slow requests under way, as many as the wallet may store.
    h.fake.behaviour = { usage: USAGE, delayMs: 1500 };
    const inFlight = [post(w.key), post(w.key)];
    await new Promise((r) => setTimeout(r, 500));

    // The owner revokes the contractor's key from the dashboard meanwhile.
    const session = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(w.account));
    assert.equal(session.status, 201, session.text);
    const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${w.keyId}`, undefined, { authorization: `Bearer ${session.body.token}` });
    assert.equal(revoked.status, 200, revoked.text);

    const answers = await Promise.all(inFlight);
    const ids: string[] = [];
    for (const res of answers) {
      assert.equal(res.status, 200);
      ids.push(((await res.json()) as { id: string }).id);
    }
    h.fake.behaviour = { usage: USAGE };

    // Nobody can reach or delete what they stored.
    for (const id of ids) for (const method of ['GET', 'DELETE'] as const) assert.equal((await byKey(ownerKey, id, method)).status, 404);

    // So they must not hold the wallet's room: the owner's key stores.
    const mine = await post(ownerKey);
    assert.equal(mine.status, 200);
    await mine.arrayBuffer();
    assert.equal(
      mine.headers.get('x-tollgate-store'),
      'stored',
      "the revoked key's requests stored after its revoke and fill the wallet's store, unreachable, until they expire",
    );
  });
});
