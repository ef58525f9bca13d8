import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import type { Hex } from 'viem';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { devChain, startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { signEip3009, signPermit2, v2Header } from '../../support/x402-payloads.ts';
import { erc20Abi } from 'viem';
import { reconcilePayment } from '../../../src/payments/reconciler.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { injectingProxy, type Inject } from '../../support/rpc-proxy.ts';
import { until } from '../../support/until.ts';
import { resignRelayerTransaction, topupThenDropSettlement } from '../../support/dropped-settlement.ts';

describe('attack: the relayer under lost answers, dropped and returning transactions, node refusals, gaps (sqlite)', () => {
  let h: TopupHarness;
  let proxy: Awaited<ReturnType<typeof injectingProxy>>;
  const inject: Inject = {};
  let usdcOffer: PaymentRequirements;
  let usdtOffer: PaymentRequirements;
  let a1: { payer: FundedAccount; header: string } | undefined;
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
  const row = (payer: FundedAccount) =>
    h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).executeTakeFirstOrThrow();
  const signedPayment = async (payer: FundedAccount) =>
    v2Header(
      usdcOffer,
      await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD }),
    );

  test('A1: a dropped settlement is released; the original tx comes back and is mined; the payer (told 202 "do not pay again") never retries', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    a1 = { payer, header };
    const payToBefore = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
    await h.anvil.rpc('evm_setAutomine', [false]);
    let raw: Hex;
    let sent: string;
    try {
      const pending = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(pending.status, 202, pending.text);
      assert.match(pending.body.message, /Do not pay again/);
      sent = pending.body.transaction;
      // The same transaction, as another node of a load-balanced endpoint still holds it (re-signed: deterministic).
      raw = await resignRelayerTransaction(h, sent);
      await h.anvil.rpc('anvil_dropTransaction', [sent]);
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
    }
    await new Promise((r) => setTimeout(r, 2500));
    await h.gw.services.topup!.reconcile();
    // The original comes back (re-broadcast by a node that kept it) and is mined.
    assert.equal(await h.anvil.rpc('eth_sendRawTransaction', [raw]), sent);
    // Waited for until mined: on a loaded machine the receipt read at once can come before the block.
    let receipt: { status: string } | null = null;
    await until(
      async () => (receipt = await h.anvil.rpc<{ status: string } | null>('eth_getTransactionReceipt', [sent])) !== null,
      'the returned settlement mined',
    );
    assert.equal(receipt!.status, '0x1');
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      await h.gw.services.topup!.reconcile();
    }
    const payToGot = (await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - payToBefore;
    const credited = await h.balance(payer.address);
    // ledger-check --chain sees nothing wrong:
    await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 0);
    assert.equal(payToGot, 5n * USD, 'the money arrived');
    assert.equal(credited, 5_000_000, 'expected: the payment the gateway told to wait is credited without a retry');
  });

  test('A1b: the A1 payer retries the same payment after all: credited once', async () => {
    assert.ok(a1);
    const retry = await h.post({ amount: 5 }, { 'payment-signature': a1.header });
    assert.equal(retry.status, 200, retry.text);
    assert.equal(await h.balance(a1.payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, a1.payer.address), 5n * USD);
    await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 1);
  });

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const nonceOf = async (a: string) => Number(await h.anvil.rpc<string>('eth_getTransactionCount', [a, 'latest']));
  const permit2Header = async (payer: FundedAccount) =>
    v2Header(usdtOffer, await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: 5n * USD }));

  for (const method of ['eip3009', 'permit2'] as const) {
    test(`B (${method}): a fee bump races the stuck original being mined: credited once, paid once`, async () => {
      const payer = await h.payer(10n);
      if (method === 'permit2') await h.chain.approvePermit2(payer, h.chain.usdt);
      const header = method === 'eip3009' ? await signedPayment(payer) : await permit2Header(payer);
      const token = method === 'eip3009' ? h.chain.usdc : h.chain.usdt;
      await h.anvil.rpc('evm_setAutomine', [false]);
      try {
        const pending = await h.post({ amount: 5 }, { 'payment-signature': header });
        assert.equal(pending.status, 202, pending.text);
        await sleep(2500);
        // The bump and a block at the same moment.
        await Promise.all([
          h.gw.services.topup!.reconcile(),
          (async () => {
            await sleep(5);
            await h.anvil.rpc('evm_mine');
          })(),
        ]);
        await h.anvil.rpc('evm_mine');
      } finally {
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      for (let i = 0; i < 3 && (await row(payer)).status !== 'credited'; i++) {
        await sleep(500);
        await h.gw.services.topup!.reconcile();
      }
      const r = await row(payer);
      assert.equal(r.status, 'credited');
      assert.equal(await h.chain.balanceOf(token, payer.address), 5n * USD);
      assert.equal(await h.balance(payer.address), 5_000_000);
      await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 1);
    });
  }

  test('D: two reconcilers (two instances) bump the same stuck row at once: one replacement wins, credited once', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    const relayerNonce = await nonceOf(h.relayer.address);
    await h.anvil.rpc('evm_setAutomine', [false]);
    try {
      const pending = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(pending.status, 202, pending.text);
      await sleep(2500);
      const stuck = await row(payer);
      const topup = h.gw.services.topup!;
      const deps = {
        db: h.gw.services.storage.db,
        client: topup.clientFor(h.chain.network)!,
        logger: { info() {}, warn() {} },
        now: Date.now,
        releaseAfterMs: 2000,
        replaceStuck: topup.facilitator.replaceStuck!.bind(topup.facilitator),
      };
      await Promise.all([reconcilePayment(deps, stuck), reconcilePayment(deps, stuck)]);
      await h.anvil.rpc('evm_mine');
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
    }
    for (let i = 0; i < 3 && (await row(payer)).status !== 'credited'; i++) {
      await sleep(500);
      await h.gw.services.topup!.reconcile();
    }
    const r = await row(payer);
    assert.equal(r.status, 'credited');
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
    assert.equal((await nonceOf(h.relayer.address)) - relayerNonce, 1);
  });

  test('E: a payer moves the funds away between verify and send, three times: refused (402), no relayer gas spent, queue not stuck', async () => {
    const payer = await h.payer(10n);
    const sink = await h.chain.newAccount();
    const topup = h.gw.services.topup! as unknown as { beforeBroadcast?: () => Promise<void> };
    const relayerNonce = await nonceOf(h.relayer.address);
    const statuses: string[] = [];
    for (let i = 0; i < 3; i++) {
      const header = await signedPayment(payer);
      topup.beforeBroadcast = async () => {
        const bal = await h.chain.balanceOf(h.chain.usdc, payer.address);
        await h.chain
          .client(payer)
          .writeContract({ address: h.chain.usdc, abi: erc20Abi, functionName: 'transfer', args: [sink.address, bal], chain: h.chain.chain, account: payer });
        await sleep(200);
      };
      let res;
      try {
        res = await h.post({ amount: 5 }, { 'payment-signature': header });
      } finally {
        topup.beforeBroadcast = undefined;
      }
      statuses.push(`${res.status} ${res.body?.error} ${res.body?.message ?? ''}`);
      // give the money back for the next round
      await h.chain.client(sink).writeContract({
        address: h.chain.usdc,
        abi: erc20Abi,
        functionName: 'transfer',
        args: [payer.address, await h.chain.balanceOf(h.chain.usdc, sink.address)],
        chain: h.chain.chain,
        account: sink,
      });
    }
    for (const s of statuses) assert.match(s, /^402 /);
    assert.equal(await nonceOf(h.relayer.address), relayerNonce, 'no relayer transaction sent');
    // the queue still works
    const other = await h.payer(10n);
    const ok = await h.post({ amount: 5 }, { 'payment-signature': await signedPayment(other) });
    assert.equal(ok.status, 200, ok.text);
  });

  test('F1: the send reaches the node but its answer is lost (RPC timeout): what the payer sees; credited without / with a retry', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    inject.swallow = 1;
    const first = await h.post({ amount: 5 }, { 'payment-signature': header });
    for (let i = 0; i < 3; i++) {
      await sleep(1000);
      await h.gw.services.topup!.reconcile();
    }
    const r1 = await row(payer);
    const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.notEqual(first.status, 402, 'never a rejection');
    assert.equal(r1.status, 'credited', 'the transaction was mined: the payment must be credited without the payer having to retry');
    assert.equal(retry.status, 200, retry.text);
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
  });

  test('F1b: the answer to the send is lost: the hash was recorded before the send, and the payer is never told "nothing was settled"', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    inject.swallow = 1;
    const first = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.ok(first.status === 200 || first.status === 202, `${first.status} ${first.text}`);
    assert.doesNotMatch(first.text, /nothing was settled/);
    assert.ok((await row(payer)).tx_hash, 'the settlement is on record');
    for (let i = 0; i < 3 && (await row(payer)).status !== 'credited'; i++) {
      await sleep(1000);
      await h.gw.services.topup!.reconcile();
    }
    assert.equal((await row(payer)).status, 'credited');
    assert.equal(await h.balance(payer.address), 5_000_000);
    await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 1);
  });

  test('F2: the RPC hangs on sends: three payers at once, how long does each wait (queue bound)?', async () => {
    const payers = await h.payers(3, 10n);
    const headers = await Promise.all(payers.map((p) => signedPayment(p)));
    inject.hang = 3;
    const t0 = Date.now();
    const results = await Promise.all(
      headers.map(async (hd) => {
        const r = await h.post({ amount: 5 }, { 'payment-signature': hd });
        return `${r.status} ${r.body?.error} ${r.body?.message ?? ''} after ${Date.now() - t0} ms`;
      }),
    );
    inject.hang = 0;
    for (const [i, p] of payers.entries()) {
      const retry = await h.post({ amount: 5 }, { 'payment-signature': headers[i]! });
      assert.equal(retry.status, 200, retry.text);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, p.address), 5n * USD);
    }
    for (const r of results) assert.doesNotMatch(r, /^402/, results.join('; '));
  });

  test('F3: the nonce is read from a node that is ahead (pending count + 1): a gapped send; nothing stuck, credited once', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    inject.ahead = 1;
    const first = await h.post({ amount: 5 }, { 'payment-signature': header });
    // Another payer fills the gap (or not); then the reconciler runs.
    const other = await h.payer(10n);
    await h.post({ amount: 5 }, { 'payment-signature': await signedPayment(other) });
    for (let i = 0; i < 4 && (await row(payer)).status !== 'credited'; i++) {
      await sleep(1000);
      await h.gw.services.topup!.reconcile();
    }
    const r1 = await row(payer);
    if (r1.status !== 'credited') {
      await h.post({ amount: 5 }, { 'payment-signature': header });
    }
    assert.notEqual(first.status, 402);
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
  });

  test('F4: a gapped settlement on a quiet gateway: the reconciler bumps it every settle wait, with no cap on count or fee', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    inject.ahead = 1;
    const first = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(first.status, 202, first.text);
    const fees: string[] = [];
    let firstTip = 0n;
    let lastTip = 0n;
    for (let i = 0; i < 8; i++) {
      await sleep(2100);
      await h.gw.services.topup!.reconcile();
      const r = await row(payer);
      const tx = await h.anvil.rpc<{ maxFeePerGas: string; maxPriorityFeePerGas: string; nonce: string }>('eth_getTransactionByHash', [r.tx_hash]);
      if (i === 0) firstTip = BigInt(tx.maxPriorityFeePerGas);
      lastTip = BigInt(tx.maxPriorityFeePerGas);
      fees.push(`nonce ${Number(tx.nonce)} maxFee ${BigInt(tx.maxFeePerGas)} tip ${BigInt(tx.maxPriorityFeePerGas)}`);
    }
    // Fill the gap: the bumped transaction is mined with its inflated tip.
    const other = await h.payer(10n);
    await h.post({ amount: 5 }, { 'payment-signature': await signedPayment(other) });
    for (let i = 0; i < 3 && (await row(payer)).status !== 'credited'; i++) {
      await sleep(500);
      await h.gw.services.topup!.reconcile();
    }
    assert.ok(lastTip <= firstTip * 2n, `the tip grew ${Number(lastTip) / Number(firstTip)}x in 8 passes with no bound`);
  });

  const reSign = (hash: string) => resignRelayerTransaction(h, hash);
  /** Sends a settlement back to the node and waits for its block: anvil's automine answers the send before it mines. */
  const sendBackMined = async (raw: Hex) => {
    const hash = await h.anvil.rpc<string>('eth_sendRawTransaction', [raw]);
    await until(async () => (await h.anvil.rpc('eth_getTransactionReceipt', [hash])) !== null, 'the returned settlement mined');
  };

  test('A2 (permit2): dropped, released, the original mined after all; no retry, then the retry', async () => {
    const payer = await h.payer(10n);
    await h.chain.approvePermit2(payer, h.chain.usdt);
    const header = await permit2Header(payer);
    const raw = await topupThenDropSettlement(h, header);
    await sleep(2500);
    await h.gw.services.topup!.reconcile();
    await sendBackMined(raw);
    for (let i = 0; i < 2; i++) {
      await sleep(1000);
      await h.gw.services.topup!.reconcile();
    }
    const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(retry.status, 200, retry.text);
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 5n * USD);
    await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 1);
  });

  test('A3: ledger-check --chain names a released payment whose transaction was mined later, until the reconciler credits it', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    const raw = await topupThenDropSettlement(h, header);
    await sleep(2500);
    await h.gw.services.topup!.reconcile();
    const released = await row(payer);
    assert.equal(released.status, 'failed');
    await sendBackMined(raw);
    const client = h.gw.services.topup!.clientFor(h.chain.network)!;
    const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => client);
    const ours = audit.problems.filter((p) => p.includes(released.id));
    assert.equal(ours.length, 1, audit.problems.join('\n'));
    assert.match(ours[0]!, /paid, never credited/);
    await h.gw.services.topup!.reconcile();
    assert.equal((await row(payer)).status, 'credited');
    assert.equal(await h.balance(payer.address), 5_000_000);
    await assertLedgerAndChainAgree(h.gw.services.storage.db, client, 1);
  });

  test('J: released as dropped; the payer retries while the original comes back: both in the pool, one block: credited once, paid once', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    await h.anvil.rpc('evm_setAutomine', [false]);
    try {
      const pending = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(pending.status, 202, pending.text);
      const t1 = pending.body.transaction as string;
      const raw = await reSign(t1);
      await h.anvil.rpc('anvil_dropTransaction', [t1]);
      await sleep(2500);
      await h.gw.services.topup!.reconcile();
      assert.equal((await row(payer)).status, 'failed');
      // The base fee moves, so the retry's transaction differs from the original.
      await h.anvil.rpc('anvil_setNextBlockBaseFeePerGas', ['0x' + (5n * 10n ** 9n).toString(16)]);
      await h.anvil.rpc('evm_mine');
      await h.post({ amount: 5 }, { 'payment-signature': header });
      await h.anvil.rpc('eth_sendRawTransaction', [raw]).catch((e: Error) => `refused: ${e.message}`);
      await h.anvil.rpc('evm_mine');
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
    }
    for (let i = 0; i < 3 && (await row(payer)).status !== 'credited'; i++) {
      await sleep(800);
      await h.gw.services.topup!.reconcile();
    }
    await h.post({ amount: 5 }, { 'payment-signature': header });
    const r = await row(payer);
    assert.equal(r.status, 'credited');
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
    await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 1);
  });

  test('J2: released as dropped; the original comes back into the pool, then the payer retries (second tx for the same authorization): credited once', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    let t1 = '';
    await h.anvil.rpc('evm_setAutomine', [false]);
    try {
      const pending = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(pending.status, 202, pending.text);
      t1 = pending.body.transaction as string;
      const raw = await reSign(t1);
      await h.anvil.rpc('anvil_dropTransaction', [t1]);
      await sleep(2500);
      await h.gw.services.topup!.reconcile();
      assert.equal((await row(payer)).status, 'failed');
      assert.equal(await h.anvil.rpc('eth_sendRawTransaction', [raw]), t1);
      const retryP = h.post({ amount: 5 }, { 'payment-signature': header });
      await sleep(800);
      await h.anvil.rpc('evm_mine');
      await retryP;
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
    }
    for (let i = 0; i < 3 && (await row(payer)).status !== 'credited'; i++) {
      await sleep(800);
      await h.gw.services.topup!.reconcile();
    }
    const r = await row(payer);
    assert.equal(r.status, 'credited');
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
    await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 1);
  });

  test('J3: as J2, but the original stays unmined until the retry has its answer; then mined; then the same payment once more', async () => {
    const payer = await h.payer(10n);
    const header = await signedPayment(payer);
    let t1 = '';
    await h.anvil.rpc('evm_setAutomine', [false]);
    try {
      const pending = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(pending.status, 202, pending.text);
      t1 = pending.body.transaction as string;
      const raw = await reSign(t1);
      await h.anvil.rpc('anvil_dropTransaction', [t1]);
      await sleep(2500);
      await h.gw.services.topup!.reconcile();
      assert.equal((await row(payer)).status, 'failed');
      assert.equal(await h.anvil.rpc('eth_sendRawTransaction', [raw]), t1);
      await h.post({ amount: 5 }, { 'payment-signature': header });
      await h.anvil.rpc('evm_mine');
    } finally {
      await h.anvil.rpc('evm_setAutomine', [true]);
    }
    for (let i = 0; i < 3 && (await row(payer)).status !== 'credited'; i++) {
      await sleep(800);
      await h.gw.services.topup!.reconcile();
    }
    await h.post({ amount: 5 }, { 'payment-signature': header });
    const r = await row(payer);
    assert.equal(r.status, 'credited');
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
    await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 1);
  });

  const operatorErrors = [
    'txpool is full', // geth ErrTxPoolOverflow
    'account limit exceeded', // geth ErrAccountLimitExceeded (one relayer, many pending settlements)
    'OldNonce, Current nonce: 7, nonce of rejected tx: 6', // Nethermind
    'Upfront cost exceeds account balance', // Besu, relayer out of gas money
    'tx fee (1.20 ether) exceeds the configured cap (1.00 ether)', // geth RPCTxFeeCap during a fee spike
  ];
  for (const message of operatorErrors) {
    test(`C: the node refuses the relayer's send with "${message}": 503, never a rejection; the retry is credited`, async () => {
      const payer = await h.payer(10n);
      const header = await signedPayment(payer);
      inject.sendError = message;
      const refused = await h.post({ amount: 5 }, { 'payment-signature': header });
      inject.sendError = undefined;
      const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(refused.status, 503, `${refused.status} ${refused.text}`);
      assert.equal(retry.status, 200, retry.text);
    });
  }
});
