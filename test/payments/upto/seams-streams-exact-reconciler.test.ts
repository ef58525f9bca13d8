import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { USD } from '../../support/topup-harness.ts';
import { call } from '../../support/gateway.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { holdBalance, settledUpto, UPTO_BODY, uptoClient, uptoOffersOf, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * Upto where it meets other features. Responses streamed and left by its client; an exact
 * payment of the same payer while its upto request runs; count_tokens with an upto header.
 */
const RESPONSES_BODY = { model: 'fake/chat-small', input: 'hello', max_output_tokens: 100, stream: true };

async function signedFor(h: PayPerRequestHarness, payer: FundedAccount, path: string, body: unknown) {
  const asked = await call(h.gw.url, 'POST', path, body);
  assert.equal(asked.status, 402, asked.text);
  const offer = uptoOffersOf(asked.body.accepts as PaymentRequirements[])[0]!;
  const signed = await uptoClient(h, payer).createPaymentPayload({ x402Version: 2, resource: asked.body.resource, accepts: [offer] });
  return v2Header(offer, signed.payload);
}

async function checkedOnChain(h: PayPerRequestHarness) {
  await assertLedgerConsistent(h.gw.services.storage.db);
  const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
  assert.deepEqual(audit.problems, [], 'ledger-check --chain agrees');
}

for (const engine of ENGINES) {
  describe(`upto seams (${engine})`, () => {
    const harness = uptoSuite(engine, { chat: { drainTimeoutSeconds: 2 } });

    test('Responses streamed by upto, its client leaving after the first event: charged what was produced, settled exactly, hold 0', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const header = await signedFor(h, payer, '/v1/responses', RESPONSES_BODY);
      h.fake.behaviour = { chunkDelayMs: 300 };
      const abort = new AbortController();
      try {
        const res = await fetch(`${h.gw.url}/v1/responses`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'payment-signature': header },
          body: JSON.stringify(RESPONSES_BODY),
          signal: abort.signal,
        });
        assert.equal(res.status, 200);
        const reader = res.body!.getReader();
        let seen = '';
        while (!seen.includes('output_text.delta')) seen += new TextDecoder().decode((await reader.read()).value);
        abort.abort();
      } catch (err) {
        if ((err as Error).name !== 'AbortError') throw err;
      }
      const row = await settledUpto(h, payer);
      h.fake.behaviour = {};
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      const usage = await h.gw.services.storage.db
        .selectFrom('request_usage')
        .select(['charged_usdc', 'status'])
        .where('wallet', '=', `${payer.address.toLowerCase()}#upto`)
        .execute();
      assert.equal(usage.length, 1);
      const charged = Number(usage[0]!.charged_usdc);
      assert.ok(charged > 0, 'the drained answer is billed');
      assert.ok(charged <= Number(row.amount_usdc), 'never above the maximum');
      assert.equal(row.settle_amount_atomic, String(charged));
      assert.equal(row.onchain_amount_atomic, String(charged));
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(charged));
      assert.deepEqual(await holdBalance(h, payer), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      await checkedOnChain(h);
    });

    test('an exact payment of the payer while its upto stream runs: both settle their own amounts, the hold untouched by it', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const header = await signedFor(h, payer, '/v1/chat/completions', { ...UPTO_BODY, stream: true });
      h.fake.behaviour = { chunkDelayMs: 200 };
      const streaming = fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'payment-signature': header },
        body: JSON.stringify({ ...UPTO_BODY, stream: true }),
      }).then((r) => r.text());
      // While the upto request holds: an exact (Permit2) payment of the same wallet for another request.
      let holding = false;
      for (let i = 0; i < 100 && !holding; i++) {
        holding = (await uptoPayments(h, payer)).at(-1)?.upto_state === 'holding';
        if (!holding) await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(holding, 'the upto request holds');
      const exact = await h.openai(payer, 'permit2').chat.completions.create(UPTO_BODY).withResponse();
      const exactCharged = Number(exact.response.headers.get('x-tollgate-charged-usdc'));
      assert.ok(exactCharged > 0);
      const text = await streaming;
      h.fake.behaviour = {};
      assert.match(text, /\[DONE\]/);
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      const exactRow = await h.gw.services.storage.db
        .selectFrom('payments')
        .selectAll()
        .where('payer', '=', payer.address.toLowerCase())
        .where('upto_state', 'is', null)
        .executeTakeFirstOrThrow();
      assert.equal(exactRow.status, 'credited');
      assert.equal(
        await h.chain.balanceOf(h.chain.usdt, payer.address),
        10n * USD - BigInt(row.settle_amount_atomic!) - BigInt(exactRow.onchain_amount_atomic!),
        'the chain moved the upto charge and the exact payment, nothing else',
      );
      assert.equal(await h.balance(payer.address), Number(exactRow.amount_usdc) - exactCharged, "the exact payment's rest stays in the payer's own balance");
      assert.deepEqual(await holdBalance(h, payer), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      await checkedOnChain(h);
    });

    test('count_tokens with an upto payment header: 401, nothing recorded or taken', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const body = { model: 'fake/chat-small', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] };
      const header = await signedFor(h, payer, '/v1/messages', body);
      const counted = await call(h.gw.url, 'POST', '/v1/messages/count_tokens', body, { 'payment-signature': header });
      assert.equal(counted.status, 401, counted.text);
      assert.equal((await uptoPayments(h, payer)).length, 0);
      // The header is still good for its own request.
      const paid = await call(h.gw.url, 'POST', '/v1/messages', body, { 'payment-signature': header });
      assert.equal(paid.status, 200, paid.text);
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      await checkedOnChain(h);
    });
  });
}

for (const engine of ENGINES) {
  describe(`the reconciler racing a long upto stream every second (${engine})`, () => {
    // A pass every second, and a holding row counts as stale after 1 s: every pass during the stream
    // reads the hold, and the last ones race the request path's own settle at the stream's end.
    const harness = uptoSuite(engine, { topup: { reconcileIntervalSeconds: 1, settleWaitSeconds: 1 }, chat: { drainTimeoutSeconds: 2 } });

    test('five streams in a row, each settled once for exactly its charge; the relayer sends one transaction each', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const client = h.gw.services.topup!.clientFor(h.chain.network)!;
      const sentBefore = await client.getTransactionCount({ address: h.relayer.address as `0x${string}` });
      let total = 0n;
      for (let i = 0; i < 5; i++) {
        const header = await signedFor(h, payer, '/v1/chat/completions', { ...UPTO_BODY, stream: true });
        h.fake.behaviour = { chunkDelayMs: 150 + 40 * i };
        const text = await fetch(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'payment-signature': header },
          body: JSON.stringify({ ...UPTO_BODY, stream: true }),
        }).then((r) => r.text());
        h.fake.behaviour = {};
        assert.match(text, /\[DONE\]/);
        const row = await settledUpto(h, payer);
        assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
        assert.equal(row.onchain_amount_atomic, row.settle_amount_atomic);
        total += BigInt(row.settle_amount_atomic!);
      }
      const sent = (await client.getTransactionCount({ address: h.relayer.address as `0x${string}` })) - sentBefore;
      assert.equal(sent, 5, 'one settle transaction per payment');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - total);
      assert.deepEqual(await holdBalance(h, payer), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      await checkedOnChain(h);
    });
  });
}
