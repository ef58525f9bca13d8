import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { appendPaymentIdentifierToExtensions, generatePaymentId } from '@x402/extensions/payment-identifier';
import { x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { payPerRequestSuite, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { exactUsdcClient, payingWithIdentifier } from '../../support/identified-payments.ts';

const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
/** payPerRequest.minUsd's default: every request here is offered at 1 cent. */
const CENT = 10_000n;

for (const engine of ENGINES) {
  describe(`payment-identifier: a paid request retried with the same id is not paid twice (${engine})`, () => {
    const harness = payPerRequestSuite(engine);
    let h: PayPerRequestHarness;
    beforeEach(() => {
      h = harness();
    });

    /**
     * The stock @x402/fetch client of `payer`, putting `id` in every payment it signs (the
     * package's helper, from a before-payment hook), and recording the payment headers it sends.
     */
    function payingWithId(payer: FundedAccount, id: string, sent: string[] = []) {
      const pay = payingWithIdentifier(exactUsdcClient(h, payer), id, sent);
      return (body: unknown = BODY) =>
        pay(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    }
    const post = (headers: Record<string, string>, body: unknown = BODY) =>
      fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const chainBalance = (p: FundedAccount) => h.chain.balanceOf(h.chain.usdc, p.address);
    const paymentsOf = (p: FundedAccount) =>
      h.gw.services.storage.db.selectFrom('payments').select('id').where('payer', '=', p.address.toLowerCase()).execute();
    const usageOf = (p: FundedAccount) =>
      h.gw.services.storage.db.selectFrom('request_usage').select(['request_id', 'charged_usdc']).where('wallet', '=', p.address.toLowerCase()).execute();

    test('the 402 advertises payment-identifier (optional)', async () => {
      const res = await post({});
      assert.equal(res.status, 402);
      const { decodePaymentRequiredHeader } = await import('@x402/core/http');
      const ext = decodePaymentRequiredHeader(res.headers.get('payment-required')!).extensions!['payment-identifier'] as { info: { required: boolean } };
      assert.deepEqual(ext.info, { required: false });
    });

    test('a retry after the answer was lost, with a new payment: 409 naming the first request and its charge; paid once on chain', async () => {
      const payer = await h.payer(10n);
      const id = generatePaymentId();
      const first = await payingWithId(payer, id)();
      assert.equal(first.status, 200, await first.clone().text());
      const requestId = first.headers.get('x-request-id');
      const charged = Number(first.headers.get('x-tollgate-charged-usdc'));
      // The agent never saw that answer (a dropped connection) and sends the request again, as its client does: a new 402, a new payment, the same id.
      const retry = await payingWithId(payer, id)();
      assert.equal(retry.status, 409);
      const body = await retry.json();
      assert.equal(body.error?.code ?? body.code ?? body.error, 'PAYMENT_IDENTIFIER_CONFLICT');
      assert.match(JSON.stringify(body), new RegExp(`charged ${charged} micro-USDC`));
      if (requestId) assert.match(JSON.stringify(body), new RegExp(requestId));
      assert.match(JSON.stringify(body), /this payment was not settled/);
      assert.equal(await chainBalance(payer), 10n * USD - CENT, 'one payment arrived on chain');
      assert.equal((await paymentsOf(payer)).length, 1);
      assert.equal((await usageOf(payer)).length, 1, 'the request ran once');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    describe('attack: payment-identifier', () => {
      test('the same id with the very same payment, sent again after it ran: 409, not run or charged again', async () => {
        const payer = await h.payer(10n);
        const sent: string[] = [];
        assert.equal((await payingWithId(payer, generatePaymentId(), sent)()).status, 200);
        const balance = await h.balance(payer.address);
        const calls = h.fake.received.length;
        const again = await post({ 'payment-signature': sent[0]! });
        assert.equal(again.status, 409);
        assert.equal(h.fake.received.length, calls);
        assert.equal(await h.balance(payer.address), balance, 'the balance was not charged again');
        assert.equal((await usageOf(payer)).length, 1);
        await assertLedgerConsistent(h.gw.services.storage.db);
      });

      test('the same id for another body: 409, and that payment is not settled', async () => {
        const payer = await h.payer(10n);
        const id = generatePaymentId();
        assert.equal((await payingWithId(payer, id)()).status, 200);
        const other = await payingWithId(payer, id)({ ...BODY, messages: [{ role: 'user', content: 'something else' }] });
        assert.equal(other.status, 409);
        assert.match(await other.text(), /for another request body/);
        assert.equal(await chainBalance(payer), 10n * USD - CENT);
        assert.equal((await paymentsOf(payer)).length, 1);
      });

      test('the same id from another payer: its own request, paid and run; nothing of the first is said', async () => {
        const [a, b] = [await h.payer(10n), await h.payer(10n)];
        const id = generatePaymentId();
        assert.equal((await payingWithId(a, id)()).status, 200);
        const res = await payingWithId(b, id)();
        assert.equal(res.status, 200, await res.clone().text());
        assert.equal(await chainBalance(b), 10n * USD - CENT);
        assert.equal((await usageOf(b)).length, 1);
        await assertLedgerConsistent(h.gw.services.storage.db);
      });

      test('concurrent retries with the same id, each with its own payment: exactly one is paid and runs', async () => {
        const payer = await h.payer(10n);
        const id = generatePaymentId();
        const results = await Promise.all(Array.from({ length: 5 }, () => payingWithId(payer, id)()));
        const statuses = results.map((r) => r.status).sort();
        assert.deepEqual(statuses, [200, 409, 409, 409, 409], JSON.stringify(statuses));
        assert.equal(await chainBalance(payer), 10n * USD - CENT, 'one payment arrived on chain');
        assert.equal((await paymentsOf(payer)).length, 1);
        assert.equal((await usageOf(payer)).length, 1);
        await assertLedgerConsistent(h.gw.services.storage.db);
      });

      test('a refused payment frees its id: the next payment under it is taken', async () => {
        const payer = await h.payer(10n);
        const id = generatePaymentId();
        const sent: string[] = [];
        // A payment whose signature was tampered with: refused, nothing settled.
        const { decodePaymentRequiredHeader } = await import('@x402/core/http');
        const offer = decodePaymentRequiredHeader((await post({})).headers.get('payment-required')!);
        const client = new x402Client();
        registerExactEvmScheme(client, { signer: payer });
        client.setSpendControls({
          maxAmountPerPayment: '$1',
          allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '1000000' }],
        });
        appendPaymentIdentifierToExtensions(offer.extensions!, id);
        const payload = await client.createPaymentPayload(offer);
        const inner = payload.payload as { signature: string };
        inner.signature = inner.signature.slice(0, 10) + (inner.signature[10] === 'a' ? 'b' : 'a') + inner.signature.slice(11);
        const bad = await post({ 'payment-signature': Buffer.from(JSON.stringify(payload)).toString('base64') });
        assert.equal(bad.status, 402, await bad.clone().text());
        const good = await payingWithId(payer, id, sent)();
        assert.equal(good.status, 200, await good.clone().text());
        assert.equal(await chainBalance(payer), 10n * USD - CENT);
      });

      test('an id that breaks the format: 400 before anything is settled', async () => {
        const payer = await h.payer(10n);
        const res = await payingWithId(payer, 'short')().catch((err: Error) => err);
        // The stock helper refuses to put a malformed id in a payment; send one by hand.
        assert.ok(res instanceof Error && /Invalid payment ID/.test(res.message));
        const { decodePaymentRequiredHeader } = await import('@x402/core/http');
        const offer = decodePaymentRequiredHeader((await post({})).headers.get('payment-required')!);
        const client = new x402Client();
        registerExactEvmScheme(client, { signer: payer });
        client.setSpendControls({
          maxAmountPerPayment: '$1',
          allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '1000000' }],
        });
        const payload = await client.createPaymentPayload(offer);
        (payload.extensions as Record<string, { info: Record<string, unknown> }>)['payment-identifier']!.info.id = 'no spaces allowed here!';
        const bad = await post({ 'payment-signature': Buffer.from(JSON.stringify(payload)).toString('base64') });
        assert.equal(bad.status, 400);
        assert.match(await bad.text(), /16 to 128 letters, digits/);
        assert.equal(await chainBalance(payer), 10n * USD);
      });
    });
  });
}
