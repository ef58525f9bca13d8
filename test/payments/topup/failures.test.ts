import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { eip3009ABI } from '@x402/evm';
import { parseSignature, type Hex } from 'viem';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { call, startTestGateway } from '../../support/gateway.ts';
import { freePort } from '../../../src/devchain/ports.ts';
import { startTopupHarness, USD, type TopupHarness, usdcAuthorization } from '../../support/topup-harness.ts';
import { base64Json, signEip3009, signPermit2, v2Header } from '../../support/x402-payloads.ts';

describe('top-up failure matrix: status, code, and nothing credited', () => {
  let h: TopupHarness;
  let usdcOffer: PaymentRequirements;
  let usdtOffer: PaymentRequirements;
  before(async () => {
    h = await startTopupHarness('sqlite');
    const offer = await h.post({ amount: 5 });
    [usdcOffer, usdtOffer] = offer.body.accepts;
  });
  after(() => h.stop());

  /** Runs `attempt` and proves it moved no money anywhere. */
  async function nothingMoves(payer: FundedAccount, attempt: () => Promise<void>) {
    const tokens = [h.chain.usdc, h.chain.usdt];
    const before = await Promise.all(tokens.flatMap((t) => [h.chain.balanceOf(t, payer.address), h.chain.balanceOf(t, h.payTo.address)]));
    await attempt();
    const after = await Promise.all(tokens.flatMap((t) => [h.chain.balanceOf(t, payer.address), h.chain.balanceOf(t, h.payTo.address)]));
    assert.deepEqual(after, before, 'token balances moved');
    assert.equal(await h.balance(payer.address), 0, 'something was credited');
    await h.gw.assertLedger();
  }

  /** The payer paid 5 USD of its 100 once, and was credited 5 USD once. */
  async function paidOnce(payer: FundedAccount) {
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 95n * USD);
  }

  const usdcPayment = (payer: FundedAccount, over: Partial<Parameters<typeof signEip3009>[0]> = {}) =>
    signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD, ...over });

  test('undecodable payments are 400 INVALID_PAYMENT', async () => {
    const payer = await h.payer();
    await nothingMoves(payer, async () => {
      for (const header of [
        '%%% not base64 %%%',
        Buffer.from('{"x402Version": 2,').toString('base64'),
        base64Json({ hello: 'world' }),
        base64Json({ x402Version: 2, accepted: usdcOffer, payload: { signature: '0x12' } }),
      ]) {
        const res = await h.post({ amount: 5 }, { 'payment-signature': header });
        assert.equal(res.status, 400, res.text);
        assert.equal(res.body.error, 'INVALID_PAYMENT');
        assert.ok(!res.text.includes(header.slice(0, 20)) || header.length < 20, 'the header is echoed');
      }
    });
  });

  test('payments that do not match the offer are 400 PAYMENT_MISMATCH', async () => {
    const payer = await h.payer();
    const stranger = await h.payer(0n);
    await nothingMoves(payer, async () => {
      const cases: Array<[string, PaymentRequirements, unknown]> = [
        ['wrong amount', { ...usdcOffer, amount: '4000000' }, await usdcPayment(payer, { value: 4n * USD })],
        ['signed amount differs from the offer', usdcOffer, await usdcPayment(payer, { value: 4n * USD })],
        ['wrong payTo', { ...usdcOffer, payTo: stranger.address }, await usdcPayment(payer, { to: stranger.address })],
        ['signed payTo differs', usdcOffer, await usdcPayment(payer, { to: stranger.address })],
        ['wrong asset', { ...usdcOffer, asset: stranger.address }, await usdcPayment(payer)],
        ['wrong network', { ...usdcOffer, network: 'eip155:1' }, await usdcPayment(payer)],
        ['wrong transfer method', usdtOffer, await usdcPayment(payer)],
      ];
      for (const [name, accepted, payload] of cases) {
        const res = await h.post({ amount: 5 }, { 'payment-signature': v2Header(accepted, payload) });
        assert.equal(res.status, 400, `${name}: ${res.text}`);
        assert.equal(res.body.error, 'PAYMENT_MISMATCH', name);
      }
    });
  });

  /** 402 PAYMENT_REJECTED with a fresh offer the client can pay instead. */
  function assertRejected(res: Awaited<ReturnType<TopupHarness['post']>>, name: string) {
    assert.equal(res.status, 402, `${name}: ${res.text}`);
    assert.equal(res.body.error, 'PAYMENT_REJECTED', name);
    assert.equal(res.body.accepts.length, 2, name);
    assert.ok(res.headers.get('payment-required'), name);
  }

  test('an expired authorization is 402 PAYMENT_REJECTED', async () => {
    const payer = await h.payer();
    await nothingMoves(payer, async () => {
      const expired = await usdcPayment(payer, { validBefore: BigInt(Math.floor(Date.now() / 1000) - 10) });
      assertRejected(await h.post({ amount: 5 }, { 'payment-signature': v2Header(usdcOffer, expired) }), 'expired');
    });
  });

  test('a signature by another key is 402 PAYMENT_REJECTED', async () => {
    const payer = await h.payer();
    const thief = await h.payer(0n);
    await nothingMoves(payer, async () => {
      const forged = await usdcPayment(payer, { signer: thief });
      assertRejected(await h.post({ amount: 5 }, { 'payment-signature': v2Header(usdcOffer, forged) }), 'forged');
    });
  });

  test('insufficient token balance is 402 PAYMENT_REJECTED', async () => {
    const poor = await h.payer(1n); // holds 1 USD, pays 5
    await nothingMoves(poor, async () => {
      assertRejected(await h.post({ amount: 5 }, { 'payment-signature': v2Header(usdcOffer, await usdcPayment(poor)) }), 'poor');
    });
  });

  test('Permit2 without the approval is 402 PAYMENT_REJECTED, and works once approved', async () => {
    const payer = await h.payer();
    const payload = await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: 5n * USD });
    const header = v2Header(usdtOffer, payload);
    await nothingMoves(payer, async () => {
      const res = await h.post({ amount: 5 }, { 'payment-signature': header });
      assertRejected(res, 'no approval');
      assert.match(res.body.reason, /allowance/);
    });
    // A rejected authorization is not burned: after approving, the same payment goes through.
    await h.chain.approvePermit2(payer, h.chain.usdt);
    const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(retry.status, 200, retry.text);
    assert.equal(await h.balance(payer.address), 5_000_000);
    await h.gw.assertLedger();
  });

  test('the same payment replayed: the original answer, credited once', async () => {
    const payer = await h.payer();
    const header = v2Header(usdcOffer, await usdcPayment(payer));
    const first = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(first.status, 200, first.text);
    const second = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(second.status, 200, second.text);
    assert.deepEqual(second.body, first.body);
    assert.equal(second.headers.get('payment-response'), first.headers.get('payment-response'));
    // v1 header name, same payment: still the same answer.
    const third = await h.post({ amount: 5 }, { 'x-payment': header });
    assert.deepEqual(third.body, first.body);
    await paidOnce(payer);
    await h.gw.assertLedger();
  });

  test('another payload reusing a credited nonce is refused without revealing the first', async () => {
    const payer = await h.payer();
    const paid = await usdcPayment(payer);
    assert.equal((await h.post({ amount: 5 }, { 'payment-signature': v2Header(usdcOffer, paid) })).status, 200);
    const reuse = await usdcPayment(payer, { nonce: paid.authorization.nonce as Hex, validBefore: BigInt(paid.authorization.validBefore) - 1n });
    const res = await h.post({ amount: 5 }, { 'payment-signature': v2Header(usdcOffer, reuse) });
    assertRejected(res, 'nonce reuse');
    assert.equal(res.body.balance_usdc, undefined);
    assert.equal(await h.balance(payer.address), 5_000_000);
  });

  test('the same payment sent 20 times at once is credited exactly once', async () => {
    const payer = await h.payer();
    const header = v2Header(usdcOffer, await usdcPayment(payer));
    const results = await Promise.all(Array.from({ length: 20 }, () => h.post({ amount: 5 }, { 'payment-signature': header })));
    const statuses = results.map((r) => r.status);
    assert.deepEqual(statuses, Array(20).fill(200), JSON.stringify(results.map((r) => r.body)));
    assert.equal(new Set(results.map((r) => r.body.transaction)).size, 1);
    await paidOnce(payer);
    const credits = await h.gw.services.storage.db.selectFrom('ledger_entries').selectAll().where('wallet', '=', payer.address.toLowerCase()).execute();
    assert.equal(credits.length, 1);
    await h.gw.assertLedger();
  });

  test('an authorization front-run by a third party is credited once, from their transaction', async () => {
    const payer = await h.payer();
    const payload = await usdcPayment(payer);
    const a = payload.authorization;
    // Someone who saw the signed authorization submits it to the token first.
    const frontRunner = await h.payer(0n);
    const { r, s, v } = parseSignature(payload.signature);
    const frontTx = await h.chain.client(frontRunner).writeContract({
      address: h.chain.usdc,
      abi: eip3009ABI,
      functionName: 'transferWithAuthorization',
      args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce, Number(v), r, s],
    });
    assert.equal((await h.chain.client(frontRunner).waitForTransactionReceipt({ hash: frontTx })).status, 'success');
    const res = await h.post({ amount: 5 }, { 'payment-signature': v2Header(usdcOffer, payload) });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.transaction, frontTx);
    assert.equal(res.body.credited_usdc, 5_000_000);
    const again = await h.post({ amount: 5 }, { 'payment-signature': v2Header(usdcOffer, payload) });
    assert.deepEqual(again.body, res.body);
    await paidOnce(payer);
    await h.gw.assertLedger();
  });

  test('no payment header, signature or relayer key reaches the logs or an error body', async () => {
    const payer = await h.payer();
    const payload = await usdcPayment(payer);
    const header = v2Header(usdcOffer, payload);
    const bodies = [
      (await h.post({ amount: 5 }, { 'payment-signature': header })).text,
      (await h.post({ amount: 6 }, { 'payment-signature': header })).text,
      (await h.post({ amount: 5 }, { 'x-payment': header.slice(0, -8) })).text,
    ];
    const logs = h.gw.logs();
    assert.ok(logs.length > 0);
    for (const secret of [header.slice(0, 40), payload.signature.slice(2, 42), h.relayer.privateKey.slice(2)]) {
      assert.ok(!logs.includes(secret), 'a secret reached the logs');
      for (const body of bodies) assert.ok(!body.includes(secret), 'a secret reached a response');
    }
  });

  test('a top-up credit with no payment behind it fails the ledger check', async () => {
    const { applyMovement } = await import('../../../src/ledger/movements.ts');
    const { checkLedger } = await import('../../../src/ledger/invariants.ts');
    const { startTestGateway: start } = await import('../../support/gateway.ts');
    const scratch = await start({ engine: 'sqlite' });
    try {
      await scratch.services.storage.db
        .transaction()
        .execute((trx) =>
          applyMovement(trx, { wallet: '0x00000000000000000000000000000000000000aa', kind: 'topup', amountUsdc: 1, reference: 'payment:forged' }),
        );
      const result = await checkLedger(scratch.services.storage.db);
      assert.equal(result.ok, false);
      assert.match(result.problems.join('\n'), /no payment behind them/);
    } finally {
      await scratch.stop();
    }
  });
});

describe('top-ups when the chain or facilitator is down', () => {
  test('RPC down: 503 FACILITATOR_UNAVAILABLE, nothing recorded as paid, the gateway keeps serving', async () => {
    const h = await startTopupHarness('sqlite');
    const deadPort = await freePort();
    const down = await startTestGateway({
      engine: 'sqlite',
      env: h.env,
      config: { ...h.gatewayConfig, chains: { [String(h.anvil.chainId)]: { rpcUrl: `http://127.0.0.1:${deadPort}` } } },
    });
    try {
      const payer = await h.payer();
      const offer = await call(down.url, 'POST', '/v1/topup', { amount: 5 });
      assert.equal(offer.status, 402);
      const payload = await usdcAuthorization(h, payer, 5n * USD);
      for (let i = 0; i < 3; i++) {
        const res = await call(down.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': v2Header(offer.body.accepts[0], payload) });
        assert.equal(res.status, 503, res.text);
        assert.equal(res.body.error, 'FACILITATOR_UNAVAILABLE');
        assert.ok(Number(res.headers.get('retry-after')) > 0, 'a 503 says when to send the same payment again');
        assert.match(res.body.message, /same payment/);
      }
      assert.equal((await call(down.url, 'GET', '/health')).status, 200);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 100n * USD);
      await down.assertLedger();
      // The same authorization still works on a gateway whose RPC is up: nothing was burned.
      const ok = await h.post({ amount: 5 }, { 'payment-signature': v2Header(offer.body.accepts[0], payload) });
      assert.equal(ok.status, 200, ok.text);
    } finally {
      await down.stop();
      await h.stop();
    }
  });
});
