import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { eip3009ABI, x402ExactPermit2ProxyABI } from '@x402/evm';
import { erc20Abi, parseSignature, type Hex } from 'viem';
import { USDC_DOMAIN, X402_EXACT_PERMIT2_PROXY, type FundedAccount } from '../../src/devchain/deploy.ts';
import { applyMovement } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { openStorage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { auditCreditsOnChain } from '../../src/payments/audit.ts';
import { runTollgate } from '../support/cli.ts';
import { ENGINES, freshDatabaseUrl, tempDir } from '../support/engines.ts';
import { offerBook, startTopupHarness, USD, type TopupHarness } from '../support/topup-harness.ts';
import { permit2SettleArgs, signEip3009, signPermit2 } from '../support/x402-payloads.ts';

/**
 * "Pay 1 USDC, get credited 10,000 USD": a payment's terms never change once recorded,
 * and what is credited is what the chain's Transfer log shows reached payTo. The attack as
 * reproduced, on the real chain, for EIP-3009 (USDC) and Permit2 (USDT), on both engines.
 */
const junkSignature = () => `0x${randomBytes(65).toString('hex')}` as Hex;
const TEN_THOUSAND = 10_000n * USD;

type Payment = {
  /** The payer's valid 1 USD authorization. It first fails: the payer lacks the funds (EIP-3009) or the Permit2 approval. */
  valid: unknown;
  /** Other terms (`value` token units) signed by the payer under the same nonce: a valid signature. */
  signed(value: bigint): Promise<unknown>;
  /** The same authorization for `value` with a junk signature: refused before anything is recorded. */
  junk(value: bigint): unknown;
  /** What made the first attempt fail is fixed: the payer is funded, or approves Permit2. */
  unblock(): Promise<void>;
  /** The payer sends the valid 1 USD authorization to the chain themselves. */
  settleOnChain(): Promise<Hex>;
};

for (const engine of ENGINES) {
  describe(`a payment's terms are fixed and its credit comes from the chain (${engine})`, () => {
    let h: TopupHarness;
    let book: Awaited<ReturnType<typeof offerBook>>;
    before(async () => {
      h = await startTopupHarness(engine);
      book = await offerBook(h, [1, 10_000]);
    });
    after(() => h?.stop());

    const pay = (usd: number, method: 'eip3009' | 'permit2', payload: unknown) => book.pay(usd, method, payload);
    const rowOf = (payer: FundedAccount) =>
      h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).executeTakeFirstOrThrow();

    /** `payer` holds no USDC yet: the first attempt fails for lack of funds, and records the terms. */
    async function eip3009Payment(payer: FundedAccount): Promise<Payment> {
      const validBefore = BigInt(Math.floor(Date.now() / 1000)) + 300n;
      const sign = (value: bigint, nonce?: Hex) =>
        signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value, nonce, validBefore });
      const valid = await sign(USD);
      const a = valid.authorization;
      return {
        valid,
        signed: (value) => sign(value, a.nonce as Hex),
        junk: (value) => ({ signature: junkSignature(), authorization: { ...a, value: value.toString() } }),
        async unblock() {
          const funder = await h.payer(10n);
          const hash = await h.chain
            .client(funder)
            .writeContract({ address: h.chain.usdc, abi: erc20Abi, functionName: 'transfer', args: [payer.address, 10n * USD] });
          await h.chain.client(funder).waitForTransactionReceipt({ hash });
        },
        async settleOnChain() {
          const { r, s, v } = parseSignature(valid.signature);
          const hash = await h.chain.client(payer).writeContract({
            address: h.chain.usdc,
            abi: eip3009ABI,
            functionName: 'transferWithAuthorization',
            args: [a.from, a.to, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce as Hex, Number(v), r, s],
          });
          assert.equal((await h.chain.client(payer).waitForTransactionReceipt({ hash })).status, 'success');
          return hash;
        },
      };
    }

    /** `payer` has not approved Permit2 on USDT yet: the first attempt fails, and records the terms. */
    async function permit2Payment(payer: FundedAccount): Promise<Payment> {
      const valid = await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: USD });
      const p = valid.permit2Authorization;
      return {
        valid,
        signed: (amount) =>
          signPermit2({
            token: h.chain.usdt,
            chainId: h.anvil.chainId,
            from: payer,
            to: h.payTo.address,
            amount,
            nonce: BigInt(p.nonce),
            deadline: BigInt(p.deadline),
          }),
        junk: (value) => ({ signature: junkSignature(), permit2Authorization: { ...p, permitted: { ...p.permitted, amount: value.toString() } } }),
        unblock: () => h.chain.approvePermit2(payer, h.chain.usdt).then(() => undefined),
        async settleOnChain() {
          // The valid permit, settled through the x402 Permit2 proxy by the payer themselves.
          const hash = await h.chain.client(payer).writeContract({
            address: X402_EXACT_PERMIT2_PROXY,
            abi: x402ExactPermit2ProxyABI,
            functionName: 'settle',
            args: permit2SettleArgs(valid),
          });
          assert.equal((await h.chain.client(payer).waitForTransactionReceipt({ hash })).status, 'success');
          return hash;
        },
      };
    }

    /** The ledger invariants, the new payment checks, and the same re-read from the chain. */
    async function moneyChecksHold(expectCredited: number) {
      await h.gw.assertLedger();
      const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
      assert.deepEqual(audit.problems, []);
      assert.ok(audit.checked >= expectCredited);
    }

    for (const [method, payment] of [
      ['eip3009', eip3009Payment],
      ['permit2', permit2Payment],
    ] as const) {
      // Signatures are checked before anything is recorded, so a junk
      // signature records nothing: the attacker here is the payer, who signs the other terms validly.
      test(`${method}: 1 USD failed, settled on chain by the payer, then 10,000 USD under the same nonce: refused; the original terms credit 1 USD`, async () => {
        const payer = await h.payer(method === 'eip3009' ? 0n : 10n);
        const p = await payment(payer);

        const first = await pay(1, method, p.valid);
        assert.equal(first.status, 402, first.text);
        assert.equal((await rowOf(payer)).status, 'failed');

        await p.unblock();
        const tx = await p.settleOnChain();

        // A junk signature is refused before anything is recorded (it can move nothing).
        const junk = await pay(10_000, method, p.junk(TEN_THOUSAND));
        assert.equal(junk.status, 402, junk.text);
        assert.match(junk.body.reason, /invalid_exact_evm_signature/);
        const attack = await pay(10_000, method, await p.signed(TEN_THOUSAND));
        assert.equal(attack.status, 402, attack.text);
        assert.equal(attack.body.error, 'PAYMENT_REJECTED');
        assert.match(attack.body.reason, /already recorded for a different payment/);
        assert.doesNotMatch(attack.body.message, /sign a new payment/i, 'the payment under this nonce settled: never "pay again"');
        // The other terms credit nothing; the chain's 1 USD for the recorded terms is credited (the
        // conflict asked the chain about the recorded payment), once.
        assert.ok([0, 1_000_000].includes(await h.balance(payer.address)));
        const row = await rowOf(payer);
        assert.equal(row.amount_atomic, USD.toString(), 'the recorded terms did not change');
        assert.equal(Number(row.amount_usdc), 1_000_000);

        // The retry of the very first payment: the 1 USD that truly arrived is credited, once.
        const retry = await pay(1, method, p.valid);
        assert.equal(retry.status, 200, retry.text);
        assert.equal(retry.body.credited_usdc, 1_000_000);
        assert.equal(retry.body.transaction, tx);
        assert.equal(await h.balance(payer.address), 1_000_000);
        assert.equal((await rowOf(payer)).onchain_amount_atomic, USD.toString());
        assert.equal((await pay(10_000, method, await p.signed(TEN_THOUSAND))).status, 402, 'still refused after the credit');
        assert.equal(await h.balance(payer.address), 1_000_000);
        await moneyChecksHold(1);
      });

      test(`${method}: terms recorded first at 10,000 USD, then 1 USD arrives: the same payment again credits nothing and the row says why`, async () => {
        const payer = await h.payer(method === 'eip3009' ? 0n : 10n);
        const p = await payment(payer);
        const big = await p.signed(TEN_THOUSAND);
        assert.equal((await pay(10_000, method, big)).status, 402);
        await p.unblock();
        await p.settleOnChain();
        const again = await pay(10_000, method, big);
        assert.equal(again.status, 402, again.text);
        assert.equal(await h.balance(payer.address), 0);
        const row = await rowOf(payer);
        assert.equal(row.status, 'failed');
        assert.match(row.failure_reason ?? '', /1000000 token units reached payTo .* not the 10000000000 this payment recorded/);
        assert.equal(row.onchain_amount_atomic, USD.toString());
        await moneyChecksHold(0);
      });
    }

    test('ledger-check: a credit that is not the on-chain amount fails, and --chain catches columns rewritten to agree', async () => {
      const payer = await h.payer(10n);
      const res = await h.topup(payer, 1);
      assert.equal(res.status, 200, await res.text());
      const real = await rowOf(payer);
      const chains = { [String(h.anvil.chainId)]: { rpcUrl: h.anvil.rpcUrl } };
      const ledgerCheck = (databaseUrl: string, ...extra: string[]) => {
        const config = join(tempDir(), 'tollgate.yaml');
        writeFileSync(config, JSON.stringify({ database: { url: databaseUrl }, chains }));
        return runTollgate(['--config', config, 'admin', 'ledger-check', ...extra]);
      };

      const clean = await ledgerCheck(h.gw.config.database.url, '--chain');
      assert.equal(clean.code, 0, clean.stdout + clean.stderr);
      assert.match(clean.stdout, /chain: \d+ credited payments re-read/);

      // What the defect produced: 10,000 USD credited behind a payment of 1 USD of terms and of
      // chain transfer (a copy of the real payment, in a database of its own, with its ledger entry).
      const forged = async (columns: { amount_atomic: string; amount_usdc: number; onchain_amount_atomic: string }) => {
        const url = await freshDatabaseUrl(engine);
        const storage = openStorage(url);
        await migrateToLatest(storage);
        await storage.db
          .insertInto('payments')
          .values({ ...real, ...columns })
          .execute();
        await storage.db
          .transaction()
          .execute((trx) => applyMovement(trx, { wallet: real.payer, kind: 'topup', amountUsdc: columns.amount_usdc, reference: `payment:${real.id}` }));
        return Object.assign(storage, { url });
      };
      const inflated = await forged({ amount_atomic: USD.toString(), amount_usdc: 10_000_000_000, onchain_amount_atomic: USD.toString() });
      try {
        const check = await checkLedger(inflated.db);
        assert.match(check.problems.join('\n'), /credited 10000000000 micro-USDC, but 1000000 arrived on chain/);
        const cli = await ledgerCheck(inflated.url);
        assert.equal(cli.code, 1, cli.stdout);
      } finally {
        await inflated.close();
      }

      // Every column rewritten to agree with the inflated credit: only the chain can tell.
      const rewritten = await forged({ amount_atomic: '10000000000', amount_usdc: 10_000_000_000, onchain_amount_atomic: '10000000000' });
      try {
        assert.deepEqual((await checkLedger(rewritten.db)).problems, []);
        const withoutChain = await ledgerCheck(rewritten.url);
        assert.equal(withoutChain.code, 0, withoutChain.stdout);
        const withChain = await ledgerCheck(rewritten.url, '--chain');
        assert.equal(withChain.code, 1, withChain.stdout);
        assert.match(withChain.stdout, /moved 1000000 token units to payTo, the payment records 10000000000/);
      } finally {
        await rewritten.close();
      }
      await moneyChecksHold(1);
    });
  });
}
