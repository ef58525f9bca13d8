import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { permit2WitnessTypes, x402ExactPermit2ProxyABI } from '@x402/evm';
import { erc20Abi, parseAbi, parseSignature, serializeSignature, type Address, type Hex } from 'viem';
import { PERMIT2_ADDRESS, X402_EXACT_PERMIT2_PROXY, USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { ENGINES } from '../../support/engines.ts';
import { offerBook, startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { VOID_CONFIRMATIONS } from '../../../src/payments/onchain.ts';
import { permit2SettleArgs, signEip3009, signPermit2, v1Header } from '../../support/x402-payloads.ts';

/**
 * Attacks on the top-up money path, on a real anvil
 * chain with Circle's USDC, Uniswap's Permit2 and a Tether-like USDT, on both engines. Each test is
 * an attack; the invariant each one checks is "what is credited is what reached payTo from the payer".
 */
const junkSignature = () => `0x${randomBytes(65).toString('hex')}` as Hex;
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const permit2Abi = parseAbi(['function invalidateUnorderedNonces(uint256 wordPos, uint256 mask)']);

for (const engine of ENGINES) {
  describe(`attack: top-ups (${engine})`, () => {
    let h: TopupHarness;
    let book: Awaited<ReturnType<typeof offerBook>>;
    before(async () => {
      h = await startTopupHarness(engine);
      book = await offerBook(h, [1, 10_000]);
    });
    after(() => h?.stop());

    const pay = (usd: number, method: 'eip3009' | 'permit2', payload: unknown) => book.pay(usd, method, payload);
    const rowsOf = (payer: FundedAccount) =>
      h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute();
    const usdcPermit = (payer: FundedAccount, token: Address, amount = USD) =>
      signPermit2({ token, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount });
    const usdc3009 = (payer: FundedAccount, nonce?: Hex) =>
      signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: USD, nonce });

    /** Token units that left the payer, in micro-USDC (both tokens have 6 decimals). */
    const spent = async (payer: FundedAccount, funded: bigint) =>
      Number(funded - (await h.chain.balanceOf(h.chain.usdc, payer.address)) + (funded - (await h.chain.balanceOf(h.chain.usdt, payer.address))));

    async function moneyChecksHold() {
      await h.gw.assertLedger();
      const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
      assert.deepEqual(audit.problems, []);
    }

    async function settleViaProxy(payer: FundedAccount, p: Awaited<ReturnType<typeof signPermit2>>): Promise<Hex> {
      const hash = await h.chain
        .client(payer)
        .writeContract({ address: X402_EXACT_PERMIT2_PROXY, abi: x402ExactPermit2ProxyABI, functionName: 'settle', args: permit2SettleArgs(p) });
      assert.equal((await h.chain.client(payer).waitForTransactionReceipt({ hash })).status, 'success');
      return hash;
    }

    test('permit2: the same on-chain nonce written with a leading zero is the same payment key, so other terms under it are refused', async () => {
      const payer = await h.payer(10n);
      const valid = await usdcPermit(payer, h.chain.usdt);
      const p = valid.permit2Authorization;
      // Recorded before the payer approved Permit2 on USDT: verification fails, the row stays failed.
      // (A junk signature records nothing since signatures are checked before recording.)
      const original = valid;
      assert.equal((await pay(1, 'permit2', original)).status, 402);
      assert.equal((await rowsOf(payer))[0]!.status, 'failed');
      await h.chain.approvePermit2(payer, h.chain.usdt);
      await settleViaProxy(payer, valid);

      // Permit2 reads "0<nonce>" as the same uint256: it must find the row recorded for <nonce>. The
      // payer signs 10,000 USD under that nonce (a valid signature: the nonce is signed as a uint256).
      const big = await signPermit2({
        token: h.chain.usdt,
        chainId: h.anvil.chainId,
        from: payer,
        to: h.payTo.address,
        amount: 10_000n * USD,
        nonce: BigInt(p.nonce),
        deadline: BigInt(p.deadline),
      });
      const padded = { signature: big.signature, permit2Authorization: { ...big.permit2Authorization, nonce: `0${p.nonce}` } };
      const attack = await pay(10_000, 'permit2', padded);
      assert.equal(attack.status, 402, attack.text);
      assert.match(attack.body.reason, /already recorded for a different payment/);
      const rows = await rowsOf(payer);
      assert.equal(rows.length, 1, 'one payment row per on-chain nonce');
      assert.equal(rows[0]!.nonce, p.nonce);

      // The original payment credits the 1 USD that truly arrived; written with a padded nonce it is
      // still that payment: its first answer, no second credit.
      const retry = await pay(1, 'permit2', original);
      assert.equal(retry.status, 200, retry.text);
      assert.equal(retry.body.credited_usdc, 1_000_000);
      const paddedSame = await pay(1, 'permit2', { ...original, permit2Authorization: { ...p, nonce: `00${p.nonce}` } });
      assert.equal(paddedSame.status, 200, paddedSame.text);
      assert.equal(paddedSame.body.transaction, retry.body.transaction);
      assert.equal(await h.balance(payer.address), 1_000_000);
      assert.equal((await rowsOf(payer)).length, 1);
      await moneyChecksHold();
    });

    test('a payload carrying both an EIP-3009 and a Permit2 authorization: the facilitator never settles terms the gateway did not record', async () => {
      const payer = await h.payer(10n);
      await h.chain.approvePermit2(payer, h.chain.usdc);
      const permit = await usdcPermit(payer, h.chain.usdc);
      const unsigned = (await usdc3009(payer)).authorization;
      const before = await h.chain.balanceOf(h.chain.usdc, payer.address);
      // Recorded as EIP-3009 (its authorization), but the facilitator routes on "permit2Authorization".
      const res = await pay(1, 'eip3009', { signature: permit.signature, authorization: unsigned, permit2Authorization: permit.permit2Authorization });
      assert.equal(res.status, 402, res.text);
      const moved = before - (await h.chain.balanceOf(h.chain.usdc, payer.address));
      assert.equal(Number(moved), await h.balance(payer.address), 'credited = what left the payer');
      assert.equal(moved, 0n, 'the Permit2 half was not settled');
      await moneyChecksHold();
    });

    test('permit2: a nonce spent on another token through the proxy credits nothing for the offered token', async () => {
      const payer = await h.payer(10n);
      await h.chain.approvePermit2(payer, h.chain.usdc);
      const usdt = await usdcPermit(payer, h.chain.usdt);
      // Recorded and failed (Permit2 not approved on USDT); a junk signature would record nothing.
      const recorded = usdt;
      assert.equal((await pay(1, 'permit2', recorded)).status, 402);
      assert.equal((await rowsOf(payer))[0]!.status, 'failed');
      // Permit2 nonces are per owner, not per token: the same nonce settles 1 USDC to payTo.
      const usdc = await usdcPermit(payer, h.chain.usdc);
      const sameNonce = { ...usdc.permit2Authorization, nonce: usdt.permit2Authorization.nonce };
      const resigned = await payer.signTypedData({
        domain: { name: 'Permit2', chainId: h.anvil.chainId, verifyingContract: PERMIT2_ADDRESS },
        types: permit2WitnessTypes,
        primaryType: 'PermitWitnessTransferFrom',
        message: {
          permitted: { token: h.chain.usdc, amount: USD },
          spender: X402_EXACT_PERMIT2_PROXY,
          nonce: BigInt(sameNonce.nonce),
          deadline: BigInt(sameNonce.deadline),
          witness: { to: h.payTo.address, validAfter: 0n },
        },
      });
      await settleViaProxy(payer, { signature: resigned, permit2Authorization: sameNonce });
      // "Used without a transfer to payTo" is final only once the use is VOID_CONFIRMATIONS blocks deep
      // (a node's logs may lag its state); until then the answer is 202 pending, never a rejection.
      await h.anvil.rpc('anvil_mine', [`0x${VOID_CONFIRMATIONS.toString(16)}`]);
      const again = await pay(1, 'permit2', recorded);
      assert.equal(again.status, 402, again.text);
      assert.equal(await h.balance(payer.address), 0, 'USDC is not the USDT the payment recorded');
      assert.equal((await rowsOf(payer))[0]!.status, 'failed');
      await moneyChecksHold();
    });

    test('eip3009: one valid payment and eight other terms under its nonce, all at once: credited = what left the payer', async () => {
      const payer = await h.payer(10n);
      const valid = await usdc3009(payer);
      const junk = Array.from({ length: 8 }, () => ({
        signature: junkSignature(),
        authorization: { ...valid.authorization, value: (10_000n * USD).toString() },
      }));
      const results = await Promise.all([pay(1, 'eip3009', valid), ...junk.map((j) => pay(10_000, 'eip3009', j))]);
      for (const r of results) assert.ok([200, 402].includes(r.status), r.text);
      assert.ok(
        results.slice(1).every((r) => r.status === 402),
        'no junk payload succeeds',
      );
      assert.equal((await rowsOf(payer)).length, 1);
      const paid = await spent(payer, 10n * USD);
      assert.equal(await h.balance(payer.address), paid);
      assert.ok(paid === 0 || paid === 1_000_000, `spent ${paid}`);
      await moneyChecksHold();
    });

    test('eip3009: a credited payment sent again as upper-case hex, as a v1 X-Payment, with a high-s or a 0/1 v signature: never a second credit', async () => {
      const payer = await h.payer(10n);
      const valid = await usdc3009(payer);
      const first = await pay(1, 'eip3009', valid);
      assert.equal(first.status, 200, first.text);

      const upper = await pay(1, 'eip3009', { ...valid, signature: `0x${valid.signature.slice(2).toUpperCase()}` });
      assert.equal(upper.status, 200, upper.text);
      assert.equal(upper.body.transaction, first.body.transaction, 'the same payment: its first answer');
      const v1 = await h.post({ amount: 1 }, { 'x-payment': v1Header(h.chain.network, valid) });
      assert.equal(v1.status, 200, v1.text);
      assert.equal(v1.body.transaction, first.body.transaction);

      const { r, s, yParity } = parseSignature(valid.signature);
      const highS = serializeSignature({ r, s: `0x${(SECP256K1_N - BigInt(s)).toString(16).padStart(64, '0')}`, yParity: 1 - yParity! });
      const vRaw = `${valid.signature.slice(0, 130)}${yParity === 0 ? '00' : '01'}` as Hex;
      for (const signature of [highS, vRaw]) {
        const res = await pay(1, 'eip3009', { ...valid, signature });
        assert.equal(res.status, 402, res.text);
      }
      assert.equal(await h.balance(payer.address), 1_000_000);
      assert.equal(await spent(payer, 10n * USD), 1_000_000);
      assert.equal((await rowsOf(payer)).length, 1);
      await moneyChecksHold();
    });

    test('permit2: two recorded nonces the payer cancelled, then one plain transfer to payTo: neither is credited with it', async () => {
      const payer = await h.payer(10n);
      const wallet = h.chain.client(payer);
      const permits = [await usdcPermit(payer, h.chain.usdt), await usdcPermit(payer, h.chain.usdt)];
      // The payer burns both nonces (cheap: no tokens move) and pays 1 USDT once, not through the proxy.
      for (const p of permits) {
        const nonce = BigInt(p.permit2Authorization.nonce);
        const hash = await wallet.writeContract({
          address: PERMIT2_ADDRESS,
          abi: permit2Abi,
          functionName: 'invalidateUnorderedNonces',
          args: [nonce >> 8n, 1n << (nonce & 0xffn)],
        });
        await wallet.waitForTransactionReceipt({ hash });
      }
      const hash = await wallet.writeContract({ address: h.chain.usdt, abi: erc20Abi, functionName: 'transfer', args: [h.payTo.address, USD] });
      await wallet.waitForTransactionReceipt({ hash });
      // Deep enough that "used without a transfer to payTo" is final.
      await h.anvil.rpc('anvil_mine', [`0x${VOID_CONFIRMATIONS.toString(16)}`]);

      const results = await Promise.all(permits.map((p) => pay(1, 'permit2', { signature: junkSignature(), permit2Authorization: p.permit2Authorization })));
      for (const r of results) assert.equal(r.status, 402, r.text);
      await h.gw.services.topup!.reconcile();
      // The transfer did not go through the x402 proxy, so it used neither authorization: it is a
      // payment made outside the gateway (an invoice, a trade), never a top-up, even when it
      // moves exactly the recorded amount.
      assert.equal(await h.balance(payer.address), 0);
      assert.deepEqual(
        (await rowsOf(payer)).filter((r) => r.status === 'credited'),
        [],
      );
      await moneyChecksHold();
    });

    test('a Permit2 nonce beyond uint256 is a 400 before anything is recorded', async () => {
      const payer = await h.payer(1n);
      const p = (await usdcPermit(payer, h.chain.usdt)).permit2Authorization;
      const res = await pay(1, 'permit2', { signature: junkSignature(), permit2Authorization: { ...p, nonce: (2n ** 256n + BigInt(p.nonce)).toString() } });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.body.error, 'INVALID_PAYMENT');
      assert.equal((await rowsOf(payer)).length, 0);
    });
  });
}
