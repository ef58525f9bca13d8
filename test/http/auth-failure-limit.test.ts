import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { newAccount, siweProof, createKeyProof } from '../support/siwe.ts';

// Failed authentications must not be free to repeat: bad API keys and junk SIWE proofs (each one
// a signature check, possibly an RPC call) from one address would be answered 401 forever.
// They are counted per client address (rateLimits.authFailures); successes are not counted.

const LIMIT = 3;

describe('failed authentication is rate limited per client address', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { rateLimits: { authFailures: { perMinute: LIMIT } } });
  });
  after(() => h.stop());

  const chat = (key: string) =>
    call(
      h.gw.url,
      'POST',
      '/v1/chat/completions',
      { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] },
      { authorization: `Bearer ${key}` },
    );

  test('successes are not counted; failures are, across keys and SIWE proofs; then 429 with Retry-After', async () => {
    const { key, account } = await h.wallet(1_000_000);
    const unused = await h.wallet(1_000_000);
    for (let i = 0; i < LIMIT + 2; i++) assert.equal((await chat(key)).status, 200, 'a valid key is never counted');

    assert.equal((await chat('sk-wrong')).status, 401);
    assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: 'Bearer sk-wrong' })).status, 401);
    const junk = { ...(await siweProof(newAccount())), signature: `0x${'11'.repeat(65)}` };
    assert.equal((await call(h.gw.url, 'POST', '/v1/auth/keys', junk)).status, 401);

    const refused = await chat('sk-wrong');
    assert.equal(refused.status, 429);
    assert.equal(refused.body.error, 'RATE_LIMITED');
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    // Blocked addresses are refused before their credentials are looked at: a proof too.
    const proof = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(newAccount()));
    assert.equal(proof.status, 429);
    assert.equal((await chat(unused.key)).status, 429, 'the address is blocked until the window frees up');
    // Except for a key this instance has found active: a neighbour must not lock its user out
    // (test/http/auth-failure-relief.test.ts).
    assert.equal((await chat(key)).status, 200);
    await h.gw.assertLedger();
  });
});
