import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { x402UptoPermit2ProxyAddress } from '@x402/evm';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { USD } from '../../support/topup-harness.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { holdBalance, settledUpto, uptoClient, uptoOffersOf, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';
import { call } from '../../support/gateway.ts';
import { proofQuery, siweProof } from '../../support/siwe.ts';
import { v2Header } from '../../support/x402-payloads.ts';

/**
 * Pay-per-request with x402 `upto`, paid by the stock `@x402/fetch` upto client under the stock
 * `openai` SDK, on the real dev chain: the 402 offers the reservation itself as an upto maximum,
 * the request runs against the payer's hold, and afterwards exactly its charge is settled on chain;
 * the payer's own balance is never touched and the hold wallet is back at 0.
 */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

/** What the chain, the ledger and the row say once an upto request's settle is done. */
export async function settledExactly(h: PayPerRequestHarness, payer: FundedAccount, chargedUsdc: number) {
  const row = await settledUpto(h, payer);
  assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
  assert.equal(row.settle_amount_atomic, String(chargedUsdc), 'the amount settled is the charge');
  assert.equal(row.onchain_amount_atomic, String(chargedUsdc), 'what arrived on chain is the charge');
  assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(chargedUsdc), 'the payer paid exactly the charge');
  assert.deepEqual(await holdBalance(h, payer), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 }, 'the hold wallet is empty again');
  assert.equal(await h.balance(payer.address), 0, "the payer's own balance is untouched");
  await assertLedgerConsistent(h.gw.services.storage.db);
  const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
  assert.deepEqual(audit.problems, [], 'ledger-check --chain agrees');
  return row;
}

for (const engine of ENGINES) {
  describe(`pay-per-request with x402 upto and the stock clients (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('the 402 offers upto entries for the reservation itself, for the Permit2 asset, bound to the relayer', async () => {
      const h = harness();
      const asked = await h.chat(BODY);
      assert.equal(asked.status, 402);
      const accepts = asked.body.accepts as PaymentRequirements[];
      const upto = uptoOffersOf(accepts);
      assert.equal(upto.length, 1, 'one upto entry: USDT, the only Permit2 offer');
      assert.equal(upto[0]!.asset.toLowerCase(), h.chain.usdt.toLowerCase());
      assert.equal(upto[0]!.amount, String(asked.body.reserved_usdc), 'the maximum is the reservation, not rounded up');
      assert.equal((upto[0]!.extra as { facilitatorAddress: string }).facilitatorAddress, h.relayer.address);
      assert.ok(
        accepts.some((r) => r.scheme === 'exact'),
        'the exact entries are still offered',
      );
    });

    test('Responses and Messages offer upto too, and a Messages request pays with it', async () => {
      const h = harness();
      const responses = await call(h.gw.url, 'POST', '/v1/responses', { model: 'fake/chat-small', input: 'hello', max_output_tokens: 100 });
      assert.equal(responses.status, 402, responses.text);
      assert.equal(uptoOffersOf(responses.body.accepts)[0]?.amount, String(responses.body.reserved_usdc));
      const messagesBody = { model: 'fake/chat-small', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] };
      const messages = await call(h.gw.url, 'POST', '/v1/messages', messagesBody);
      assert.equal(messages.status, 402, messages.text);
      const offer = uptoOffersOf(messages.body.accepts)[0]!;
      assert.equal(offer.amount, String(messages.body.reserved_usdc));
      const payer = await uptoPayer(h);
      const signed = await uptoClient(h, payer).createPaymentPayload({ x402Version: 2, resource: messages.body.resource, accepts: [offer] });
      const paid = await call(h.gw.url, 'POST', '/v1/messages', messagesBody, { 'payment-signature': v2Header(offer, signed.payload) });
      assert.equal(paid.status, 200, paid.text);
      await settledExactly(h, payer, Number(paid.headers.get('x-tollgate-charged-usdc')));
    });

    test('JSON: answered, then exactly the charge is settled on chain', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const { data, response } = await uptoOpenAI(h, payer).chat.completions.create(BODY).withResponse();
      assert.match(data.choices[0]!.message.content!, /fake provider/);
      const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged > 0);
      const row = await settledExactly(h, payer, charged);
      assert.match(row.tx_hash!, /^0x[0-9a-f]{64}$/);
      const tx = await h.gw.services.topup!.clientFor(h.chain.network)!.getTransaction({ hash: row.tx_hash as `0x${string}` });
      assert.equal(tx.to?.toLowerCase(), x402UptoPermit2ProxyAddress.toLowerCase(), 'settled through the upto proxy');
      const history = await call(h.gw.url, 'GET', `/v1/topups/${payer.address}?${proofQuery(await siweProof(payer))}`);
      assert.equal(history.status, 200, history.text);
      assert.deepEqual(
        history.body.topups.map((t: Record<string, unknown>) => [t.scheme, t.status, t.credited_usdc, t.charged_usdc, t.transaction]),
        [['upto', 'settled', 0, charged, row.tx_hash]],
        'the history says what was settled, and that nothing was credited',
      );
    });

    test('streaming: the charge is settled when the stream ends', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const stream = await uptoOpenAI(h, payer).chat.completions.create({ ...BODY, stream: true, stream_options: { include_usage: true } });
      let text = '';
      let charged: number | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        if (chunk.usage) charged = (chunk.usage as { charged_usdc?: number }).charged_usdc;
      }
      assert.match(text, /fake provider/);
      assert.ok(charged !== undefined && charged > 0);
      await settledExactly(h, payer, charged);
    });

    test('six payers at once: each settles exactly its own charge', async () => {
      const h = harness();
      const payers: FundedAccount[] = [];
      for (let i = 0; i < 6; i++) payers.push(await uptoPayer(h)); // one minter: one at a time
      const answers = await Promise.all(payers.map((p) => uptoOpenAI(h, p).chat.completions.create(BODY).withResponse()));
      for (const [i, payer] of payers.entries()) await settledExactly(h, payer, Number(answers[i]!.response.headers.get('x-tollgate-charged-usdc')));
    });

    test('a request that fails at the provider settles 0 and sends no transaction', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      h.fake.behaviour = { failStatus: 400 };
      try {
        await assert.rejects(uptoOpenAI(h, payer).chat.completions.create(BODY));
      } finally {
        h.fake.behaviour = {};
      }
      const row = await settledExactly(h, payer, 0);
      assert.equal(row.tx_hash, null, 'no transaction');
    });

    test('a replay of the same authorization is refused; nothing more settles', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      let sent: string | undefined;
      const recording: typeof fetch = async (input, init) => {
        const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
        sent ??= headers.get('payment-signature') ?? undefined;
        return fetch(input, init);
      };
      const { wrapFetchWithPayment } = await import('@x402/fetch');
      const { uptoClient } = await import('../../support/upto-pay-per-request.ts');
      const paying = wrapFetchWithPayment(recording, uptoClient(h, payer));
      const first = await paying(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(BODY),
      });
      assert.equal(first.status, 200, await first.clone().text());
      const charged = Number(first.headers.get('x-tollgate-charged-usdc'));
      await settledExactly(h, payer, charged);
      assert.ok(sent, 'the client sent a payment');
      const replay = await h.chat(BODY, { 'payment-signature': sent! });
      assert.equal(replay.status, 402, replay.text);
      assert.equal(replay.body.error, 'PAYMENT_REJECTED');
      assert.match(replay.body.message, /pays for one request only|rejected/);
      assert.equal((await uptoPayments(h, payer)).length, 1);
      await settledExactly(h, payer, charged);
    });
  });
}
