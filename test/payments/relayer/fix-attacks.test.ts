import assert from 'node:assert/strict';
import { randomUUID, randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import type { Hex } from 'viem';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { devChain, startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { signEip3009, signPermit2, v2Header } from '../../support/x402-payloads.ts';
import { parseAbi, erc20Abi } from 'viem';
import { PERMIT2_ADDRESS } from '@x402/evm';
import { injectingProxy, type Inject } from '../../support/rpc-proxy.ts';
import { topupThenDropSettlement } from '../../support/dropped-settlement.ts';

describe('attack: sends that never leave, cancelled nonces and a flood of released rows at the relayer', () => {
  let h: TopupHarness;
  let proxy: Awaited<ReturnType<typeof injectingProxy>>;
  const inject: Inject = {};
  let usdcOffer: PaymentRequirements;
  let usdtOffer: PaymentRequirements;
  before(async () => {
    const { anvil } = await devChain();
    proxy = await injectingProxy(anvil.rpcUrl, inject);
    h = await startTopupHarness('sqlite', { config: { chains: { [String(anvil.chainId)]: { rpcUrl: proxy.url } }, topup: { settleWaitSeconds: 2 } } });
    usdcOffer = (await h.post({ amount: 5 })).body.accepts[0];
    usdtOffer = (await h.post({ amount: 5 })).body.accepts[1];
  });
  after(async () => {
    await h.anvil.rpc('evm_setAutomine', [true]);
    await h?.stop();
    await proxy?.close();
  });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const db = () => h.gw.services.storage.db;
  const row = (payer: FundedAccount) => db().selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).executeTakeFirstOrThrow();

  const signed = async (payer: FundedAccount) =>
    v2Header(
      usdcOffer,
      await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD }),
    );
  const client = () => h.gw.services.topup!.clientFor(h.chain.network)!;

  test('R2: the send never leaves (hash recorded, no answer): the payer told 202 is released in bounded time, and the retry is credited once', async () => {
    const payer = await h.payer(10n);
    const header = await signed(payer);
    inject.hang = 1;
    const first = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.notEqual(first.status, 402);
    let released = false;
    for (let i = 0; i < 10 && !released; i++) {
      await sleep(1000);
      await h.gw.services.topup!.reconcile();
      released = (await row(payer)).status === 'failed';
    }
    assert.ok(first.status !== 202 || released, 'a 202 for a never-sent tx must be released in bounded time');
    const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(retry.status, 200, retry.text);
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
    await assertLedgerAndChainAgree(db(), client(), 1);
  });

  test('R3: the send never leaves; the payer retries WHILE the first request still waits on it: one transfer, one credit', async () => {
    const payer = await h.payer(10n);
    const header = await signed(payer);
    inject.hang = 1;
    const firstP = h.post({ amount: 5 }, { 'payment-signature': header });
    await sleep(1500);
    await h.post({ amount: 5 }, { 'payment-signature': header });
    await firstP;
    for (let i = 0; i < 6 && (await row(payer)).status !== 'credited'; i++) {
      await sleep(1000);
      await h.gw.services.topup!.reconcile();
    }
    const r = await row(payer);
    if (r.status !== 'credited') {
      await h.post({ amount: 5 }, { 'payment-signature': header });
    }
    assert.equal((await row(payer)).status, 'credited');
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
    await assertLedgerAndChainAgree(db(), client(), 1);
  });

  test("R4 (permit2): a released payment whose nonce the payer invalidates, then an unrelated plain transfer payer->payTo: is the plain transfer credited as this authorization's?", async () => {
    const payer = await h.payer(10n);
    await h.chain.approvePermit2(payer, h.chain.usdt);
    const header = v2Header(
      usdtOffer,
      await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: 5n * USD }),
    );
    inject.sendError = 'txpool is full';
    const refused = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(refused.status, 503, refused.text);
    const r0 = await row(payer);
    assert.equal(r0.status, 'failed');
    const nonce = BigInt(r0.nonce);
    const w = h.chain.client(payer);
    // The payer cancels the authorization (Permit2's own nonce invalidation) ...
    const inv = await w.writeContract({
      address: PERMIT2_ADDRESS,
      abi: parseAbi(['function invalidateUnorderedNonces(uint256 wordPos, uint256 mask)']),
      functionName: 'invalidateUnorderedNonces',
      args: [nonce >> 8n, 1n << (nonce & 0xffn)],
      chain: w.chain,
      account: payer,
    });
    await h.anvil.rpc('eth_getTransactionReceipt', [inv]);
    // ... and later pays payTo 5 USDT directly, for something else (an invoice, a refund of a loan, an OTC trade).
    const plain = await w.writeContract({
      address: h.chain.usdt,
      abi: erc20Abi,
      functionName: 'transfer',
      args: [h.payTo.address, 5n * USD],
      chain: w.chain,
      account: payer,
    });
    for (let i = 0; i < 7; i++) await h.anvil.rpc('evm_mine');
    await h.gw.services.topup!.reconcile();
    const r1 = await row(payer);
    await assertLedgerAndChainAgree(db(), client(), 0);
    assert.notEqual(r1.tx_hash, plain.toLowerCase(), 'expected: a transfer that did not use this authorization is never credited as this payment');
  });

  test('R5 (eip3009): the payer front-runs the in-flight settlement with cancelAuthorization: never credited, never pending forever, relayer pays one revert', async () => {
    const payer = await h.payer(10n);
    const nonce = `0x${randomBytes(32).toString('hex')}` as Hex;
    const header = v2Header(
      usdcOffer,
      await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD, nonce }),
    );
    const payToBefore = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
    await h.anvil.rpc('evm_setAutomine', [false]);
    let first;
    try {
      first = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(first.status, 202, first.text);
      const sig = await payer.signTypedData({
        domain: { ...USDC_DOMAIN, chainId: h.anvil.chainId, verifyingContract: h.chain.usdc },
        types: {
          CancelAuthorization: [
            { name: 'authorizer', type: 'address' },
            { name: 'nonce', type: 'bytes32' },
          ],
        },
        primaryType: 'CancelAuthorization',
        message: { authorizer: payer.address, nonce },
      });
      const w = h.chain.client(payer);
      await w.writeContract({
        address: h.chain.usdc,
        abi: parseAbi(['function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature)']),
        functionName: 'cancelAuthorization',
        args: [payer.address, nonce, sig],
        chain: w.chain,
        account: payer,
        maxPriorityFeePerGas: 50n * 10n ** 9n,
        maxFeePerGas: 100n * 10n ** 9n,
        gas: 200_000n,
      });
      await h.anvil.rpc('evm_mine');
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
    }
    const states: string[] = [];
    for (let i = 0; i < 8; i++) {
      await h.anvil.rpc('evm_mine');
      await sleep(300);
      await h.gw.services.topup!.reconcile();
      const r = await row(payer);
      states.push(`${r.status}:${r.failure_reason ?? ''}`);
    }
    const r = await row(payer);
    assert.equal(r.status, 'failed');
    assert.equal(await h.balance(payer.address), 0);
    assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - payToBefore, 0n);
    const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.notEqual(retry.status, 200);
    await assertLedgerAndChainAgree(db(), client(), 0);
  });

  test("R1: 100 released rows with far-future valid_before (an attacker's, refused sends) starve the released-payments pass: an honest released payment mined later is never credited", async () => {
    // The attacker: one real payment with validBefore far in the future whose send the node refuses -> 503, released (LET_GO).
    const attacker = await h.payer(10n);
    const far = 4_000_000_000n;
    const aHeader = v2Header(
      usdcOffer,
      await signEip3009({
        token: h.chain.usdc,
        chainId: h.anvil.chainId,
        domain: USDC_DOMAIN,
        from: attacker,
        to: h.payTo.address,
        value: 5n * USD,
        validBefore: far,
      }),
    );
    inject.sendError = 'txpool is full';
    const refused = await h.post({ amount: 5 }, { 'payment-signature': aHeader });
    assert.equal(refused.status, 503, refused.text);
    const aRow = await row(attacker);
    assert.equal(aRow.status, 'failed');
    assert.equal(Number(aRow.valid_before), Number(far), 'the far-future valid_before is accepted and recorded');
    // 99 more such rows (the same path, repeated with fresh nonces: cloned here for speed).
    for (let i = 0; i < 99; i++) {
      await db()
        .insertInto('payments')
        .values({
          ...aRow,
          id: randomUUID(),
          nonce: `0x${randomBytes(32).toString('hex')}`,
          payload_digest: `0x${randomBytes(32).toString('hex')}`,
          updated_at: aRow.updated_at + i,
        })
        .execute();
    }
    // The honest payer: 202 "do not pay again", dropped, released, then the original is mined.
    const payer = await h.payer(10n);
    const header = v2Header(
      usdcOffer,
      await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD }),
    );
    const raw = await topupThenDropSettlement(h, header);
    await sleep(2500);
    await h.gw.services.topup!.reconcile();
    assert.equal((await row(payer)).status, 'failed', 'released');
    const back = await h.anvil.rpc<string>('eth_sendRawTransaction', [raw]);
    // Anvil's automine answers the send before it mines: the passes below must find it mined.
    await until(async () => (await h.anvil.rpc('eth_getTransactionReceipt', [back])) !== null, 'the returned settlement mined');
    for (let i = 0; i < 3; i++) {
      await sleep(500);
      await h.gw.services.topup!.reconcile();
    }
    assert.equal((await row(payer)).status, 'credited', 'expected: the released payment, mined later, is credited by the reconciler');
    assert.equal(await h.balance(payer.address), 5_000_000);
  });
});
