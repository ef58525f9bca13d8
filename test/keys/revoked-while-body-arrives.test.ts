import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ENGINES } from '../support/engines.ts';
import type { ChatHarness } from '../support/chat-harness.ts';
import { EMBED_ID, startEmbeddingsHarness } from '../support/embeddings-harness.ts';
import { call } from '../support/gateway.ts';
import { postHead, rawRequest } from '../support/raw-http.ts';
import { siweProof } from '../support/siwe.ts';

// The key of a chat request is checked on its headers, before its body is read (an anonymous body
// is never parsed). The body may then take up to server.requestTimeoutSeconds to arrive. A holder
// of a leaked key who sends the headers of many requests and holds their bodies back must not get
// them run once the owner has revoked the key (or once it has expired): the key is checked again
// when the body is in, before anything is reserved or sent upstream.

/** One request of each route that spends with a key, as a client sends it. */
const ROUTES = [
  {
    path: '/v1/chat/completions',
    body: { model: 'fake/chat-small', messages: [{ role: 'user', content: 'spend the balance' }], max_tokens: 50 },
    auth: (key: string) => ({ Authorization: `Bearer ${key}` }),
  },
  { path: '/v1/embeddings', body: { model: EMBED_ID, input: 'spend the balance' }, auth: (key: string) => ({ Authorization: `Bearer ${key}` }) },
  {
    path: '/v1/messages',
    body: { model: 'fake/chat-small', messages: [{ role: 'user', content: 'spend the balance' }], max_tokens: 50 },
    auth: (key: string) => ({ 'x-api-key': key, 'anthropic-version': '2023-06-01' }),
  },
];

/** Sends the head of a request now; `finish` sends its body and resolves with the answer's text. */
async function heldBack(url: string, key: string, route: (typeof ROUTES)[number] = ROUTES[0]!) {
  const body = JSON.stringify(route.body);
  const client = await rawRequest(url, postHead(route.path, Buffer.byteLength(body), route.auth(key)));
  return {
    async finish(): Promise<string> {
      client.socket.write(body);
      await client.statusLine();
      // The whole answer: a JSON body is sent in one go right after its status line.
      await new Promise((r) => setTimeout(r, 200));
      const text = client.received();
      client.socket.destroy();
      return text;
    },
  };
}

for (const engine of ENGINES) {
  describe(`attack: requests whose body arrives after their key was revoked or expired (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startEmbeddingsHarness(engine);
    });
    after(() => h.stop());

    test('chat, embeddings and messages requests whose headers came before the revocation and whose body came after are 401; nothing is reserved or sent upstream', async () => {
      const { account, key, keyId } = await h.wallet(1_000_000);
      const held = await Promise.all(ROUTES.map((route) => heldBack(h.gw.url, key, route)));
      // The headers have been read and the key checked (the hook runs before the body is awaited).
      await new Promise((r) => setTimeout(r, 300));
      const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${keyId}`, await siweProof(account));
      assert.equal(revoked.status, 200, revoked.text);
      const sentBefore = h.fake.received.length;
      const answers = await Promise.all(held.map((r) => r.finish()));
      for (const [i, text] of answers.entries()) {
        assert.match(text, /^HTTP\/1\.1 401/, `a revoked key's ${ROUTES[i]!.path} ran: ${text.slice(0, 300)}`);
        assert.match(text, /invalid or revoked API key/);
      }
      assert.equal(h.fake.received.length, sentBefore, 'nothing reached the provider');
      const balance = await h.balance(account);
      assert.deepEqual(balance, { ...balance, balance_usdc: 1_000_000, locked_usdc: 0 }, 'nothing was charged or reserved');
      await h.gw.assertLedger();
    });

    test('a request whose headers came before the key expired and whose body came after is 401', async () => {
      const { account } = await h.wallet(1_000_000);
      const expiresAt = Date.now() + 1_500;
      const created = await call(h.gw.url, 'POST', '/v1/auth/keys', {
        ...(await siweProof(account, { action: 'create-key' })),
        expires_at: new Date(expiresAt).toISOString(),
      });
      assert.equal(created.status, 201, created.text);
      const held = await heldBack(h.gw.url, created.body.key);
      await new Promise((r) => setTimeout(r, expiresAt + 200 - Date.now()));
      const sentBefore = h.fake.received.length;
      const text = await held.finish();
      assert.match(text, /^HTTP\/1\.1 401/, `an expired key's request ran: ${text.slice(0, 300)}`);
      assert.match(text, /expired/);
      assert.equal(h.fake.received.length, sentBefore);
      assert.equal((await h.balance(account)).balance_usdc, 1_000_000);
      await h.gw.assertLedger();
    });
  });
}
