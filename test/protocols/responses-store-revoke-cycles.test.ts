import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, signInProof } from '../support/siwe.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };
const MAX_STORED = 2;

/**
 * The follow-up of responses-store-revoked-inflight.test.ts (02455cb: a revoked key's responses no
 * longer count toward the wallet's store, `walletHolding`). Before it, the store's bounds held "up
 * to the wallet's concurrent requests" (keeper.ts): rows stored by requests under way past a revoke
 * counted, so they could overrun the bound once. Now they count for nothing for their whole TTL, and
 * the owner repeats it: create a key, keep MAX_STORED slow stored requests under way, revoke it, again.
 * Each round adds MAX_STORED live rows (bytes up to maxBytesPerResponse each) that the bounds never
 * see, so the operator's database holds as many of a wallet's responses as it has rounds, not
 * maxStoredPerWallet (and on several instances, a revoked key keeps being accepted for up to the key
 * cache's 5 s elsewhere, every request of it storing uncounted).
 */
describe("attack: a wallet's store grown past its bounds by revoking keys with requests under way (sqlite)", () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', {
      keys: { lookupCacheSeconds: 0 },
      responses: { store: { ttlSeconds: 3600, maxStoredPerWallet: MAX_STORED } },
    });
    h.fake.behaviour = { usage: USAGE };
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  const post = (key: string) =>
    fetch(`${h.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', input: 'hi' }),
    });

  test('three rounds of revoking a key mid-request leave the wallet holding far more live responses than maxStoredPerWallet', async () => {
    const w = await h.wallet(FUNDS);
    const session = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(w.account));
    assert.equal(session.status, 201, session.text);
    for (let round = 0; round < 3; round++) {
      const created = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(w.account));
      assert.equal(created.status, 201, created.text);
      h.fake.behaviour = { usage: USAGE, delayMs: 1200 };
      const inFlight = Array.from({ length: MAX_STORED }, () => post(created.body.key as string));
      await new Promise((r) => setTimeout(r, 400));
      const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${created.body.id}`, undefined, { authorization: `Bearer ${session.body.token}` });
      assert.equal(revoked.status, 200, revoked.text);
      for (const res of await Promise.all(inFlight)) {
        assert.equal(res.status, 200);
        await res.arrayBuffer();
      }
      h.fake.behaviour = { usage: USAGE };
    }
    // And the wallet's live key stores its full allowance on top.
    for (let i = 0; i < MAX_STORED; i++) {
      const res = await post(w.key);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    // Only this wallet stores in this harness.
    const live = await h.gw.services.storage.db
      .selectFrom('stored_responses')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('expires_at', '>', Date.now())
      .executeTakeFirstOrThrow();
    // One round of concurrent requests past the bound is what keeper.ts allows; every round more is not.
    assert.ok(
      Number(live.n) <= 2 * MAX_STORED,
      `the wallet holds ${Number(live.n)} live stored responses, bounded at maxStoredPerWallet ${MAX_STORED} (plus one round of concurrency)`,
    );
  });
});
