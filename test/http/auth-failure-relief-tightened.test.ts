import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { siweProof } from '../support/siwe.ts';

/**
 * A key proven on this instance passes a client bucket blocked for failed authentications
 * (KeyCache.proven, src/http/auth/auth-failure-limit.ts). Tightening the key's limits (PATCH, from
 * any address) made the instance forget the proof as a revocation does, though the key stays
 * active: the owner who set a spend limit from their phone found their key 429 behind the blocked
 * carrier NAT, for as long as the neighbour kept it blocked (no read can prove it again there).
 */
const LIMIT = 3;
const ROW_CACHE_MS = 2_000;

for (const engine of ENGINES) {
  describe(`attack: the owner tightens a key used behind a blocked client bucket (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine, { server: { trustProxy: ['127.0.0.1', '::1'] }, rateLimits: { authFailures: { perMinute: LIMIT } } });
    });
    after(() => h.stop());

    const NAT = '2001:db8:78:1::';
    const chat = (key: string, from: string) =>
      call(
        h.gw.url,
        'POST',
        '/v1/chat/completions',
        { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] },
        { authorization: `Bearer ${key}`, 'x-forwarded-for': from },
      );
    const junkKey = () => `sk-${randomBytes(32).toString('base64url')}`;

    test('a key whose spend limit its owner set is still served behind the blocked address, under its new limit', async () => {
      const honest = await h.wallet(1_000_000);
      assert.equal((await chat(honest.key, `${NAT}1`)).status, 200);
      const statuses = [];
      for (let i = 0; i <= LIMIT; i++) statuses.push((await chat(junkKey(), `${NAT}2`)).status);
      assert.deepEqual(statuses, [401, 401, 401, 429]);

      // The owner, from another network, sets a spend limit the next chat cannot fit.
      const patched = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${honest.keyId}`, {
        ...(await siweProof(honest.account)),
        spend_limit_usdc: 1,
        spend_limit_period: 'day',
      });
      assert.equal(patched.status, 200, patched.text);
      await sleep(ROW_CACHE_MS + 200);

      const res = await chat(honest.key, `${NAT}1`);
      assert.notEqual(res.status, 429, `the owner's key behind the blocked address, after tightening it: ${res.text}`);
      assert.equal(res.status, 402, `refused by its new spend limit, not served: ${res.text}`);
      assert.equal((await chat(junkKey(), `${NAT}2`)).status, 429, 'junk keys stay refused');
      await h.gw.assertLedger();
    });
  });
}
