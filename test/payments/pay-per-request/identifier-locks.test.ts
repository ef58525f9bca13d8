import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { appendPaymentIdentifierToExtensions, generatePaymentId } from '@x402/extensions/payment-identifier';
import { x402Client, wrapFetchWithPayment } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import type { Hex } from 'viem';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { adjustBalance } from '../../../src/ledger/movements.ts';
import { memoryLimiter } from '../../../src/ratelimit/memory.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { payPerRequestSuite, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';

const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
const CENT = 10_000n;
// Reserves about 9,800 µ of the 10,000 µ price (as in attacks.test.ts).
const NEAR_CENT = { ...BODY, max_tokens: 4000 };
/** ERC-6492's magic suffix: any signature ending with it "is" an undeployed contract wallet's. */
const ERC6492_SUFFIX = '6492649264926492649264926492649264926492649264926492649264926492';

/** The stock @x402/fetch client of `payer`, putting `id` in every payment it signs (as payment-identifier.test.ts does). */
function payingWithId(h: PayPerRequestHarness, payer: FundedAccount, id: string) {
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: payer });
  client.setSpendControls({ maxAmountPerPayment: '$1', allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '1000000' }] });
  client.onBeforePaymentCreation(async ({ paymentRequired }) => {
    appendPaymentIdentifierToExtensions(paymentRequired.extensions ?? {}, id);
  });
  const pay = wrapFetchWithPayment(fetch, client);
  return (body: unknown = BODY) =>
    pay(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}
const post = (h: PayPerRequestHarness, headers: Record<string, string>, body: unknown = BODY) =>
  fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
const claimsOf = (h: PayPerRequestHarness, payer: string) =>
  h.gw.services.storage.db.selectFrom('payment_identifiers').selectAll().where('payer', '=', payer.toLowerCase()).execute();

for (const engine of ENGINES) {
  /**
   * The identifier is claimed for the payer the payment NAMES, before anyone checked that payer
   * signed it (docs/DECISIONS.md, payment identifiers: a forger could hold the id for the moment
   * its forged payment takes to be refused). The claim is released only on `rejected`/`unavailable` outcomes; a
   * throw out of settleMatched leaves it. topup.admitPayer runs first in settleMatched, before the
   * signature check, and throws 400 PAYMENT_MISMATCH for any signature carrying the ERC-6492 suffix
   * on a chain that is not the contract-wallet chain (here: a gateway whose contract wallets have no
   * chain, or a multi-chain gateway's second chain). So anyone, with no key of the victim's, holds
   * (victim, id) for 24 hours, and every such forged request leaves a row in payment_identifiers
   * (an unauthenticated client fills a table, at the public per-IP rate).
   */
  describe(`attack: a forged payment naming a victim locks the victim's payment identifier for 24 h (${engine})`, () => {
    // Contract wallets have no chain here (siwe.chainIds has no RPC): admitPayer refuses 6492 on the offers' chain.
    const harness = payPerRequestSuite(engine, { config: { siwe: { chainIds: [1, 8453] } } });
    let h: PayPerRequestHarness;
    beforeEach(() => {
      h = harness();
    });

    async function forged(victim: string, id: string): Promise<string> {
      const required = decodePaymentRequiredHeader((await post(h, {})).headers.get('payment-required')!);
      const offer = required.accepts.find((a) => a.extra?.assetTransferMethod === 'eip3009') as PaymentRequirements;
      // Signed by the attacker's key, naming the victim; then dressed as ERC-6492.
      const payment = await h.usdcPayment({ address: victim as Hex } as FundedAccount, BigInt(offer.amount), {
        signer: (await h.payer(0n)) as never,
        wrapSignature: (s: Hex) => `${s}${ERC6492_SUFFIX}` as Hex,
      });
      const envelope = { x402Version: 2, accepted: offer, payload: payment, extensions: { 'payment-identifier': { info: { id } } } };
      return Buffer.from(JSON.stringify(envelope)).toString('base64');
    }

    test("the forged request is refused, but the victim's own first request under that id is a 409 (nothing settled, nothing run)", async () => {
      const victim = await h.payer(10n);
      const id = generatePaymentId();
      const attack = await post(h, { 'payment-signature': await forged(victim.address, id) }, { ...BODY, messages: [{ role: 'user', content: 'attacker' }] });
      assert.equal(attack.status, 400, await attack.clone().text());
      const calls = h.fake.received.length;
      const res = await payingWithId(h, victim, id)();
      assert.equal(res.status, 200, `the victim's request under its own id: ${res.status} ${await res.clone().text()}`);
      assert.equal(h.fake.received.length, calls + 1);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, victim.address), 10n * USD - CENT);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('forged payments from an anonymous client leave no rows behind', async () => {
      const victims = Array.from({ length: 5 }, () => `0x${randomBytes(20).toString('hex')}`);
      for (const v of victims) assert.equal((await post(h, { 'payment-signature': await forged(v, generatePaymentId()) })).status, 400);
      const left = (await Promise.all(victims.map((v) => claimsOf(h, v)))).flat();
      assert.equal(left.length, 0, `${left.length} payment_identifiers rows written by refused forged payments, kept 24 h`);
    });
  });

  /**
   * The payer's own request refused with nothing settled, but by a throw instead of a `rejected`
   * outcome: the wallet's chat window is full (the 429 of admitVerified, after verify, before the
   * send). docs/DECISIONS.md: refusals free the id. This one does not: the claim stays with its
   * unsettled payment, and every later payment under the id is "409 … being paid for with another
   * payment … retry in a few seconds" for 24 hours. The stock client signs a new payment on every
   * 402, so a client that keeps its id across a rate-limited retry can never run that request.
   */
  describe(`attack: a rate-limited (429) paid request keeps its payment identifier claimed (${engine})`, () => {
    const harness = payPerRequestSuite(engine, { config: { rateLimits: { chat: { perMinute: 1, perDay: 1_000_000 } } } });
    let h: PayPerRequestHarness;
    beforeEach(() => {
      h = harness();
    });

    test('after the window frees up, the retry under the same id (a new payment, as the stock client sends) runs', async () => {
      const payer = await h.payer(10n);
      assert.equal((await payingWithId(h, payer, generatePaymentId())()).status, 200, 'the window (1 a minute) is used up');
      const id = generatePaymentId();
      const limited = await payingWithId(h, payer, id)();
      assert.equal(limited.status, 429, await limited.clone().text());
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD - CENT, 'the rate-limited payment was not settled');
      // The minute passes.
      (h.gw.services as { limiter: unknown }).limiter = memoryLimiter();
      const retry = await payingWithId(h, payer, id)();
      assert.equal(retry.status, 200, `the retry under the same id: ${retry.status} ${await retry.clone().text()}`);
    });
  });
  /**
   * The identifier was marked as run (`hold.start`) before the run reserved anything: a run then
   * refused (the balance no longer covers the reservation) left the identifier saying "ran" though
   * nothing ran, and the same payment under it was a 409 for a day. The mark is the holder's: a
   * refused run frees it (src/payments/paid-request/identifier-hold.ts, notRun).
   */
  describe(`attack: a paid request whose run is refused leaves its payment identifier free (${engine})`, () => {
    const harness = payPerRequestSuite(engine);
    let h: PayPerRequestHarness;
    beforeEach(() => {
      h = harness();
    });

    test('a replay refused for INSUFFICIENT_BALANCE under a new id leaves no claim; once the balance covers it, the same payment under that id runs', async () => {
      const payer = await h.payer(1n);
      const required = decodePaymentRequiredHeader((await post(h, {}, NEAR_CENT)).headers.get('payment-required')!);
      const offer = required.accepts.find((a) => a.extra?.assetTransferMethod === 'eip3009') as PaymentRequirements;
      const payment = await h.usdcPayment(payer, BigInt(offer.amount));
      const withId = (id: string) =>
        Buffer.from(JSON.stringify({ x402Version: 2, accepted: offer, payload: payment, extensions: { 'payment-identifier': { info: { id } } } })).toString(
          'base64',
        );
      // A long answer leaves less of the cent than the reservation needs.
      h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 2_000 } };
      const first = await post(h, { 'payment-signature': withId(generatePaymentId()) }, NEAR_CENT).finally(() => (h.fake.behaviour = {}));
      assert.equal(first.status, 200, await first.clone().text());
      const id = generatePaymentId();
      const calls = h.fake.received.length;
      const refused = await post(h, { 'payment-signature': withId(id) }, NEAR_CENT);
      assert.equal(refused.status, 402, await refused.clone().text());
      assert.equal(((await refused.json()) as { error: string }).error, 'INSUFFICIENT_BALANCE');
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.deepEqual(
        (await claimsOf(h, payer.address)).filter((c) => c.id === id),
        [],
        'the refused run left its identifier claimed',
      );
      // The payer's balance covers it now (topped up otherwise): the same payment under the same id runs.
      await adjustBalance(h.gw.services.storage.db, { wallet: payer.address.toLowerCase(), amountUsdc: Number(CENT), note: 'test funding' });
      const retry = await post(h, { 'payment-signature': withId(id) }, NEAR_CENT);
      assert.equal(retry.status, 200, `the retry under the same id: ${retry.status} ${await retry.clone().text()}`);
      assert.equal(h.fake.received.length, calls + 1);
      assert.equal((await claimsOf(h, payer.address)).find((c) => c.id === id)?.request_id !== null, true, 'the run marks its identifier');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - CENT, 'paid once on chain');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
