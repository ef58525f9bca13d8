import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { createSIWxPayload, encodeSIWxHeader } from '@x402/extensions/sign-in-with-x';
import { freePort } from '../../../src/devchain/ports.ts';
import { siwxChallenge } from '../../../src/siwe/siwx.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { siwxPayingOpenai } from '../../support/siwx-paying-client.ts';

const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

/**
 * Attack (a configuration that locks wallets out): server.publicUrl's host is not among siwe.domains.
 * Every sign-in-with-x challenge would name a domain the gateway's own verifier refuses, and the stock
 * client signs only for the origin it called, so a wallet with a balance could never spend it without
 * a key, and each refused signature counted as a failed authentication of its address. Expected: no
 * challenge is offered (the rest of the 402 is unchanged), a sign-in-with-x header is answered with a
 * 402 that says sign-in-with-x is not offered here, and the stock client pays instead.
 */
describe('attack: sign-in-with-x with server.publicUrl outside siwe.domains', () => {
  let h: PayPerRequestHarness;
  let origin: string;
  before(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    h = await startPayPerRequestHarness('sqlite', { config: { server: { port, publicUrl: origin }, siwe: { domains: ['elsewhere.example'] } } });
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  const post = (headers: Record<string, string> = {}) =>
    fetch(`${origin}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(BODY) });

  test('the 402 offers no sign-in-with-x challenge (payment-identifier and bazaar stay); a signed header gets a 402 saying it is not offered', async () => {
    const res = await post();
    assert.equal(res.status, 402);
    const required = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
    assert.deepEqual(Object.keys(required.extensions ?? {}).sort(), ['bazaar', 'payment-identifier']);

    // What a client would sign had the challenge been offered, exactly as the gateway would have built it.
    const payer = await h.payer(10n);
    const route = `${origin}/v1/chat/completions`;
    const secret = h.gw.services.keySecret;
    const challenge = siwxChallenge({ publicUrl: origin, resourceUrl: route, chainIds: [h.anvil.chainId], windowSeconds: 300, secret, now: Date.now() });
    const header = encodeSIWxHeader(await createSIWxPayload({ ...challenge.info, chainId: required.accepts[0]!.network, type: 'eip191' }, payer, route));
    const signed = await post({ 'sign-in-with-x': header });
    assert.equal(signed.status, 402);
    const body = await signed.json();
    assert.equal(body.error, 'SIWX_REJECTED');
    assert.match(body.message, /offers no sign-in-with-x/);
    assert.equal(decodePaymentRequiredHeader(signed.headers.get('payment-required')!).extensions?.['sign-in-with-x'], undefined);
    assert.equal(h.fake.received.length, 0, 'nothing ran');
  });

  test('the stock @x402/fetch client with the SIWX extension pays instead, and is served', async () => {
    const payer = await h.payer(10n);
    const sdk = await siwxPayingOpenai(h, origin, payer);
    for (let i = 0; i < 2; i++) {
      const { response } = await sdk.chat.completions.create(BODY).withResponse();
      assert.ok(response.headers.get('payment-response'), `request ${i} was paid`);
    }
    await assertLedgerConsistent(h.gw.services.storage.db);
  });
});
