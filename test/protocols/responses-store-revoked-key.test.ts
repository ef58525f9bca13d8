import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, signInProof } from '../support/siwe.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };
const CHARGE = 60; // 10 × 1.2 + 20 × 2.4

/**
 * Stored Responses × key revocation × the per-wallet bounds. A stored response belongs to the key
 * that stored it, and a revoked key's responses are unreachable by anyone (docs/api.md,
 * "Ownership"): no key of the wallet may read or delete them. Yet they went on counting against
 * the wallet's maxStoredPerWallet / maxBytesPerWallet until they expired (30 days by default). So a
 * restricted key handed to someone else could fill the wallet's store, and revoking it, the owner's
 * one remedy, left every other key of the wallet unable to store a response for the rest of the
 * TTL, with nothing the owner could delete to make room.
 */
describe("attack: a revoked key's unreachable responses keep filling the wallet's store (sqlite)", () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', {
      keys: { lookupCacheSeconds: 0 },
      responses: { store: { ttlSeconds: 3600, maxStoredPerWallet: 3 } },
    });
    h.fake.behaviour = { usage: USAGE };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  const post = (key: string, body: Record<string, unknown>) =>
    fetch(`${h.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', input: 'hi', ...body }),
    });
  const byKey = (key: string, id: string, method: 'GET' | 'DELETE') =>
    fetch(`${h.gw.url}/v1/responses/${id}`, { method, headers: { authorization: `Bearer ${key}` } });

  test("once the key that stored them is revoked (from a dashboard session), its responses no longer take the wallet's room", async () => {
    // The contractor's key, and the owner's own key of the same wallet.
    const w = await h.wallet(FUNDS);
    const created = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(w.account));
    assert.equal(created.status, 201, created.text);
    const ownerKey = created.body.key as string;

    const contractor: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await post(w.key, {});
      assert.equal(res.headers.get('x-tollgate-store'), 'stored');
      contractor.push(((await res.json()) as { id: string }).id);
    }
    // The bound is the wallet's, all its keys together (as designed): full while that key is live.
    const full = await post(ownerKey, {});
    assert.equal(full.headers.get('x-tollgate-store'), 'not-stored; reason=wallet_full');
    await full.arrayBuffer();

    // The owner revokes the contractor's key from the dashboard.
    const session = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(w.account));
    assert.equal(session.status, 201, session.text);
    const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${w.keyId}`, undefined, { authorization: `Bearer ${session.body.token}` });
    assert.equal(revoked.status, 200, revoked.text);

    // Unreachable by anyone now: the revoked key is a 401, the owner's key a 404, read or delete.
    assert.equal((await byKey(w.key, contractor[0]!, 'GET')).status, 401);
    for (const method of ['GET', 'DELETE'] as const) assert.equal((await byKey(ownerKey, contractor[0]!, method)).status, 404);

    // So they must not hold the wallet's room: the owner's key stores again.
    const after = await post(ownerKey, {});
    assert.equal(after.status, 200);
    assert.equal(after.headers.get('x-tollgate-store'), 'stored', "the wallet's store stays full of responses nobody can reach or delete until they expire");
    const kept = (await after.json()) as { id: string; store: boolean };
    assert.equal(kept.store, true);
    assert.equal((await byKey(ownerKey, kept.id, 'GET')).status, 200);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 5 * CHARGE);
  });
});
