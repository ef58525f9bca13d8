import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { createSIWxPayload, encodeSIWxHeader, type SIWxExtension } from '@x402/extensions/sign-in-with-x';
import { freePort } from '../../../src/devchain/ports.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };
const PREFIX = '/tollgate';

/**
 * A gateway published under a path (a reverse proxy maps https://host/tollgate/… to its /…, and
 * server.publicUrl says https://host/tollgate, "the address clients use"). Its 402s name that
 * address: the x402 resource and the sign-in-with-x challenge's uri are <publicUrl>/v1/…, and the
 * stock client signs that uri as it is. The verifier compared the signed uri's path with the route
 * as the gateway sees it (/v1/…, the prefix stripped by the proxy), so every challenge the gateway
 * itself issued was refused: sign-in-with-x could never spend a balance there, and no start-up
 * warning said so (siwxConfigProblem looks at the host and origin only). Here the proxy is
 * simulated: the client signs for the published URL and the request reaches the gateway's own path.
 */
describe('sign-in-with-x behind a path-prefixed server.publicUrl (sqlite)', () => {
  let h: PayPerRequestHarness;
  let origin: string;
  before(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    h = await startPayPerRequestHarness('sqlite', { config: { server: { port, publicUrl: `${origin}${PREFIX}` } } });
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  // What the proxy forwards to: the gateway's own route.
  const post = (headers: Record<string, string> = {}) =>
    fetch(`${origin}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(BODY) });

  test("the challenge the gateway issues for its published URL, signed unchanged, spends the wallet's balance", async () => {
    const payer = await h.payer(10n);
    await h.openai(payer).chat.completions.create(BODY); // pays; the change stays as a balance
    const before = await h.balance(payer.address);
    assert.ok(before > 0);

    const offered = await post();
    assert.equal(offered.status, 402);
    const required = decodePaymentRequiredHeader(offered.headers.get('payment-required')!);
    assert.equal(required.resource.url, `${origin}${PREFIX}/v1/chat/completions`, 'the published URL');
    const ext = required.extensions!['sign-in-with-x'] as SIWxExtension;
    assert.equal(ext.info.uri, `${origin}${PREFIX}/v1/chat/completions`);

    // The stock client's own helpers, for the URL the client called (the published one).
    const payload = await createSIWxPayload({ ...ext.info, chainId: required.accepts[0]!.network, type: 'eip191' }, payer, ext.info.uri);
    const res = await post({ 'sign-in-with-x': encodeSIWxHeader(payload) });
    const text = await res.text();
    assert.equal(
      res.status,
      200,
      `a challenge this gateway issued was refused: ${res.status === 200 ? '' : (JSON.parse(text) as { message?: string }).message}`,
    );
    assert.ok((await h.balance(payer.address)) < before, 'billed to the balance');
  });

  test('held: a challenge signed for another route under the same prefix is still refused', async () => {
    const payer = await h.payer(10n);
    await h.openai(payer).chat.completions.create(BODY);
    const offered = await post();
    const required = decodePaymentRequiredHeader(offered.headers.get('payment-required')!);
    const ext = required.extensions!['sign-in-with-x'] as SIWxExtension;
    const other = `${origin}${PREFIX}/v1/embeddings`;
    const payload = await createSIWxPayload(
      { ...ext.info, uri: other, resources: [other], chainId: required.accepts[0]!.network, type: 'eip191' },
      payer,
      other,
    );
    const res = await post({ 'sign-in-with-x': encodeSIWxHeader(payload) });
    assert.equal(res.status, 402);
    assert.equal((await res.json()).error, 'SIWX_REJECTED');
  });
});
