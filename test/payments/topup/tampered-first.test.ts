import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { x402ExactPermit2ProxyABI } from '@x402/evm';
import { parseAbi, type Hex } from 'viem';
import { USDC_DOMAIN, X402_EXACT_PERMIT2_PROXY, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { decodePaymentHeader } from '../../../src/payments/decode.ts';
import { matchPayment } from '../../../src/payments/match.ts';
import { buildOffers } from '../../../src/payments/offers.ts';
import { markFailed, openPayment } from '../../../src/payments/payment-store.ts';
import { ENGINES } from '../../support/engines.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { permit2SettleArgs, signEip3009, signPermit2, v1Header, v2Header } from '../../support/x402-payloads.ts';

/**
 * Someone who sees a payer's
 * payment header first sends a copy with the last signature byte changed. The gateway recorded the
 * row (network, asset, payer, nonce) before verifying; verification failed and the row stayed
 * failed. The attacker then submitted the genuine authorization on chain: the payer's USDC reached
 * payTo. The payer's genuine header was a "conflict" ("sign a new payment": pay twice), and the
 * reconciler never revisits a row failed for its signature: paid, never credited.
 *
 * Fixed: only a payload the payer signed records a row (signature-check.ts), and a conflict asks
 * the chain about the recorded payment (settle-topup.ts, settleConflict). Every test checks the
 * answer, the chain, the balance, the rows, and `ledger-check --chain`; the ledger invariants are
 * checked after each test.
 */
const nowS = () => BigInt(Math.floor(Date.now() / 1000));
const CENT = 10_000;
const CHAT = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
const V1 = { topup: { x402v1Body: true } };
const transferWithAuthorization = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
]);

/** The signature with its last byte (v) flipped: what the attacker sends ahead of the real header. */
const tamper = (signature: string) => `${signature.slice(0, -2)}${signature.slice(-2) === '1b' ? '1c' : '1b'}`;

type Eip3009 = Awaited<ReturnType<typeof signEip3009>>;
type Permit2 = Awaited<ReturnType<typeof signPermit2>>;

/** The attacker (any account) puts the genuine EIP-3009 authorization on chain, straight on the token. */
async function settleOnToken(h: TopupHarness, attacker: FundedAccount, p: Eip3009) {
  const a = p.authorization;
  const wallet = h.chain.client(attacker);
  const hash = await wallet.writeContract({
    address: h.chain.usdc,
    abi: transferWithAuthorization,
    functionName: 'transferWithAuthorization',
    args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce as Hex, p.signature],
    chain: wallet.chain,
    account: attacker,
  });
  assert.equal((await wallet.waitForTransactionReceipt({ hash })).status, 'success');
}

/** The attacker puts the genuine permit on chain through the x402 Permit2 proxy (anyone may call it). */
async function settleViaProxy(h: TopupHarness, attacker: FundedAccount, p: Permit2) {
  const wallet = h.chain.client(attacker);
  const hash = await wallet.writeContract({
    address: X402_EXACT_PERMIT2_PROXY,
    abi: x402ExactPermit2ProxyABI,
    functionName: 'settle',
    args: permit2SettleArgs(p),
    chain: wallet.chain,
    account: attacker,
  });
  assert.equal((await wallet.waitForTransactionReceipt({ hash })).status, 'success');
}

function harnessChecks(get: () => TopupHarness) {
  const rowsOf = (payer: FundedAccount) =>
    get().gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute();
  /** `ledger-check --chain`: every credit is what the chain moved, and no failed payment was paid. */
  async function chainAgrees() {
    const h = get();
    const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
    assert.deepEqual(audit.problems, []);
  }
  /** The payer paid `atomic` once, is credited exactly that once (also after a reconciler pass), in one row. */
  async function creditedOnce(payer: FundedAccount, token: Hex, funded: bigint, atomic: bigint) {
    const h = get();
    await h.gw.services.topup!.reconcile();
    assert.equal(await h.chain.balanceOf(token, payer.address), funded - atomic, 'the payer paid once');
    const rows = await rowsOf(payer);
    assert.deepEqual(
      rows.map((r) => [r.status, r.amount_atomic, r.onchain_amount_atomic]),
      [['credited', atomic.toString(), atomic.toString()]],
    );
    const credits = await h.gw.services.storage.db
      .selectFrom('ledger_entries')
      .select('amount_usdc')
      .where('wallet', '=', payer.address.toLowerCase())
      .where('kind', '=', 'topup')
      .execute();
    assert.deepEqual(
      credits.map((c) => Number(c.amount_usdc)),
      [Number(atomic)],
      'one credit, of what reached payTo',
    );
    await chainAgrees();
  }
  return { rowsOf, chainAgrees, creditedOnce };
}

for (const engine of ENGINES) {
  describe(`attack: a tampered v1 copy sent first, the real authorization settled by the attacker (${engine})`, () => {
    let h: TopupHarness;
    before(async () => {
      h = await startTopupHarness(engine, { config: V1 });
    });
    afterEach(() => h.gw.assertLedger());
    after(async () => {
      await h?.gw.assertLedger();
      await h?.stop();
    });
    const { rowsOf, creditedOnce } = harnessChecks(() => h);
    const usdc3009 = (payer: FundedAccount, validAfter = 0n) =>
      signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: USD, validAfter });
    const offerOf = async (method: 'eip3009' | 'permit2'): Promise<PaymentRequirements> => {
      const res = await h.post({ amount: 1 });
      const v2 = JSON.parse(Buffer.from(res.headers.get('payment-required')!, 'base64').toString());
      return v2.accepts.find((o: PaymentRequirements) => o.extra?.assetTransferMethod === method);
    };

    test('the payer whose USDC reached payTo through their own authorization is credited', async () => {
      const payer = await h.payer(5n);
      const attacker = await h.payer(0n);
      const p = await usdc3009(payer, nowS() - 600n);
      const first = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', { ...p, signature: tamper(p.signature) }) });
      assert.equal(first.status, 402, first.text);
      assert.deepEqual(await rowsOf(payer), [], 'a tampered copy records nothing');
      await settleOnToken(h, attacker, p);
      const genuine = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', p) });
      assert.equal(genuine.status, 200, genuine.text);
      assert.equal(genuine.body.credited_usdc, 1_000_000);
      assert.equal(await h.balance(payer.address), 1_000_000);
      await creditedOnce(payer, h.chain.usdc, 5n * USD, USD);
      // Sent again: its first answer, never a second credit.
      const again = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', p) });
      assert.equal(again.status, 200, again.text);
      await creditedOnce(payer, h.chain.usdc, 5n * USD, USD);
    });

    test('the same through the v2 PAYMENT-SIGNATURE header', async () => {
      const payer = await h.payer(5n);
      const attacker = await h.payer(0n);
      const offer = await offerOf('eip3009');
      const p = await usdc3009(payer);
      const first = await h.post({ amount: 1 }, { 'payment-signature': v2Header(offer, { ...p, signature: tamper(p.signature) }) });
      assert.equal(first.status, 402, first.text);
      assert.deepEqual(await rowsOf(payer), []);
      await settleOnToken(h, attacker, p);
      const genuine = await h.post({ amount: 1 }, { 'payment-signature': v2Header(offer, p) });
      assert.equal(genuine.status, 200, genuine.text);
      await creditedOnce(payer, h.chain.usdc, 5n * USD, USD);
    });

    test('the tampered copy and the genuine header at once, the attacker settling meanwhile: one row, one credit', async () => {
      const payer = await h.payer(5n);
      const attacker = await h.payer(0n);
      const offer = await offerOf('eip3009');
      const p = await usdc3009(payer);
      const tampered = v2Header(offer, { ...p, signature: tamper(p.signature) });
      const answers = await Promise.all([
        h.post({ amount: 1 }, { 'payment-signature': tampered }),
        h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', p) }),
        settleOnToken(h, attacker, p).catch(() => 'reverted'),
      ]);
      assert.equal(answers[0].status, 402, answers[0].text);
      assert.ok([200, 202].includes(answers[1].status), answers[1].text);
      const genuine = await h.post({ amount: 1 }, { 'payment-signature': v2Header(offer, p) });
      assert.equal(genuine.status, 200, genuine.text);
      await creditedOnce(payer, h.chain.usdc, 5n * USD, USD);
    });

    test('permit2 (USDT): a tampered permit first, the genuine permit settled through the proxy by the attacker', async () => {
      const payer = await h.payer(5n);
      const attacker = await h.payer(0n);
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const offer = await offerOf('permit2');
      const p = await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: USD });
      const first = await h.post({ amount: 1 }, { 'payment-signature': v2Header(offer, { ...p, signature: tamper(p.signature) }) });
      assert.equal(first.status, 402, first.text);
      assert.deepEqual(await rowsOf(payer), []);
      await settleViaProxy(h, attacker, p);
      const genuine = await h.post({ amount: 1 }, { 'payment-signature': v2Header(offer, p) });
      assert.equal(genuine.status, 200, genuine.text);
      await creditedOnce(payer, h.chain.usdt, 5n * USD, USD);
    });

    /** A row as a tampered copy recorded it before this fix (recorded, then failed on its signature). */
    async function legacyTamperedRow(payer: FundedAccount, p: Eip3009) {
      const offers = buildOffers(h.gw.services.config.topup, 1_000_000);
      const matched = matchPayment(decodePaymentHeader(v1Header('base-sepolia', { ...p, signature: tamper(p.signature) })), offers);
      const opened = await openPayment(h.gw.services.storage.db, matched, 0, Date.now());
      assert.equal(opened.kind, 'claimed');
      await markFailed(h.gw.services.storage.db, opened.row.id, 'invalid_exact_evm_signature');
      assert.equal((await rowsOf(payer)).length, 1);
    }

    test('a row a tampered copy recorded before the fix, the genuine authorization settled by the attacker: the genuine header is credited from the chain', async () => {
      const payer = await h.payer(5n);
      const attacker = await h.payer(0n);
      const p = await usdc3009(payer, nowS() - 600n);
      await legacyTamperedRow(payer, p);
      await settleOnToken(h, attacker, p);
      // The reconciler does not revisit a row failed on its signature; ledger-check --chain names it.
      await h.gw.services.topup!.reconcile();
      const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
      assert.equal(audit.problems.length, 1);
      assert.match(audit.problems[0]!, /paid, never credited/);
      const genuine = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', p) });
      assert.equal(genuine.status, 200, genuine.text);
      assert.doesNotMatch(genuine.text, /sign a new payment/i);
      await creditedOnce(payer, h.chain.usdc, 5n * USD, USD);
    });

    test('a row a tampered copy recorded before the fix, the genuine authorization still unused: the genuine header settles it', async () => {
      const payer = await h.payer(5n);
      const p = await usdc3009(payer, nowS() - 600n);
      await legacyTamperedRow(payer, p);
      const genuine = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', p) });
      assert.equal(genuine.status, 200, genuine.text);
      await creditedOnce(payer, h.chain.usdc, 5n * USD, USD);
    });

    test('other terms under a nonce whose recorded payment was settled on chain: refused, never "sign a new payment", the settled one credited once', async () => {
      const payer = await h.payer(10n);
      const attacker = await h.payer(0n);
      const p = await usdc3009(payer, nowS() - 600n);
      await legacyTamperedRow(payer, p);
      await settleOnToken(h, attacker, p);
      // The payer (or anyone they gave it to) signs 2 USD under the same nonce.
      const offers2 = buildOffers(h.gw.services.config.topup, 2_000_000);
      const two = await signEip3009({
        token: h.chain.usdc,
        chainId: h.anvil.chainId,
        domain: USDC_DOMAIN,
        from: payer,
        to: h.payTo.address,
        value: 2n * USD,
        nonce: p.authorization.nonce as Hex,
      });
      assert.ok(offers2.length > 0);
      const other = await h.post({ amount: 2 }, { 'x-payment': v1Header('base-sepolia', two) });
      assert.equal(other.status, 402, other.text);
      assert.doesNotMatch(other.body.message, /sign a new payment/i);
      assert.match(other.body.message, /Do not pay again/);
      await creditedOnce(payer, h.chain.usdc, 10n * USD, USD);
    });

    test('a signature that recovers to the payer only in a non-canonical form (high s) records nothing', async () => {
      const payer = await h.payer(5n);
      const p = await usdc3009(payer);
      const { parseSignature, serializeSignature } = await import('viem');
      const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
      const { r, s, yParity } = parseSignature(p.signature);
      const highS = serializeSignature({ r, s: `0x${(N - BigInt(s)).toString(16).padStart(64, '0')}`, yParity: 1 - yParity! });
      const res = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', { ...p, signature: highS }) });
      assert.equal(res.status, 402, res.text);
      assert.deepEqual(await rowsOf(payer), []);
      const genuine = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', p) });
      assert.equal(genuine.status, 200, genuine.text);
      await creditedOnce(payer, h.chain.usdc, 5n * USD, USD);
    });
    test('cost: the check before recording makes no RPC call for an EOA signature; a refused one costs one eth_getCode', async () => {
      const { createPublicClient, http } = await import('viem');
      const { signedByPayer } = await import('../../../src/payments/signature-check.ts');
      const methods: string[] = [];
      const client = createPublicClient({
        transport: http(h.anvil.rpcUrl, { onFetchRequest: async (req) => void methods.push(JSON.parse(await req.clone().text()).method) }),
      });
      const payer = await h.payer(0n);
      const offers = buildOffers(h.gw.services.config.topup, 1_000_000);
      const p = await usdc3009(payer);
      const matched = matchPayment(decodePaymentHeader(v1Header('base-sepolia', p)), offers);
      // The cost asserted is the RPC calls; the time a check takes belongs to the benchmark, not a
      // test (a loaded machine made a time limit here fail without any change to the code).
      for (let i = 0; i < 50; i++) assert.equal(await signedByPayer(client as never, matched), true);
      assert.deepEqual(methods, [], 'no RPC call for an EOA signature');
      const tampered = matchPayment(decodePaymentHeader(v1Header('base-sepolia', { ...p, signature: tamper(p.signature) })), offers);
      assert.equal(await signedByPayer(client as never, tampered), false);
      assert.deepEqual(methods, ['eth_getCode'], "a signature that is not the key's: the payer's code is read once");
      const permit = await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: USD });
      const matchedPermit = matchPayment(decodePaymentHeader(v1Header('base-sepolia', permit)), offers);
      assert.equal(await signedByPayer(client as never, matchedPermit), true);
      assert.equal(methods.length, 1);
    });
  });

  describe(`attack: a tampered chat payment sent first, the real authorization settled by the attacker (${engine})`, () => {
    let h: PayPerRequestHarness;
    before(async () => {
      h = await startPayPerRequestHarness(engine, { config: V1 });
    });
    afterEach(() => h.gw.assertLedger());
    after(async () => {
      await h?.gw.assertLedger();
      await h?.stop();
    });
    const { rowsOf, chainAgrees } = harnessChecks(() => h);

    for (const version of ['v2', 'v1'] as const) {
      test(`pay-per-request (${version} header): the tampered copy records nothing; the genuine payment is credited once and the request runs`, async () => {
        const payer = await h.payer(1n);
        const attacker = await h.payer(0n);
        const res402 = await h.chat(CHAT);
        const offer = JSON.parse(Buffer.from(res402.headers.get('payment-required')!, 'base64').toString()).accepts[0] as PaymentRequirements;
        const p = await h.usdcPayment(payer, BigInt(CENT), { validAfter: nowS() - 600n });
        const header = (payload: unknown): Record<string, string> =>
          version === 'v2' ? { 'payment-signature': v2Header(offer, payload) } : { 'x-payment': v1Header('base-sepolia', payload) };
        const calls = h.fake.received.length;
        const first = await h.chat(CHAT, header({ ...p, signature: tamper(p.signature) }));
        assert.equal(first.status, 402, first.text);
        assert.deepEqual(await rowsOf(payer), []);
        await settleOnToken(h, attacker, p);
        const genuine = await h.chat(CHAT, header(p));
        assert.equal(genuine.status, 200, genuine.text);
        assert.equal(h.fake.received.length, calls + 1, 'the paid request ran once');
        await h.gw.services.topup!.reconcile();
        assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - BigInt(CENT));
        const rows = await rowsOf(payer);
        assert.deepEqual(
          rows.map((r) => [r.status, r.purpose, Number(r.amount_usdc)]),
          [['credited', 'chat', CENT]],
        );
        const usage = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('wallet', '=', payer.address.toLowerCase()).execute();
        assert.equal(usage.length, 1);
        assert.equal(await h.balance(payer.address), CENT - Number(usage[0]!.charged_usdc));
        await chainAgrees();
      });
    }
  });
}
