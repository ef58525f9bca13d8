import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { createPublicClient, decodeFunctionData, http, parseAbi, serializeSignature, type Hex } from 'viem';
import { adjustBalance } from '../../../src/ledger/movements.ts';
import { FacilitatorUnavailable } from '../../../src/payments/facilitator/facilitator.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';

/**
 * An exact pay-per-request payment is settled with transferWithAuthorization, whose calldata holds
 * the whole authorization and its signature: once the settle is in the mempool or mined, anyone
 * watching the chain can rebuild the payment header (the `accepted` half is the gateway's public
 * offer for that amount). The gateway lets a "replay" (a request that did not open the payment)
 * run a further request on the payer's balance for topup.maxTimeoutSeconds (300 s by default) after
 * the credit. So every payer of a pay-per-request call handed every chain observer a 5-minute
 * credential to the wallet's whole balance (top-ups included), one request per replay at up to the
 * payment's amount, as often as the wallet's chat window allows. Now a payment runs only the request
 * it was first sent with (its route and body, which never reach the chain: request-digest.ts); the
 * payer's own client sending that request again still runs it ("replay: ... runs one it can" in
 * attacks.test.ts).
 */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
const ATTACKER_BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: "the attacker's own question" }], max_tokens: 50 };
const SAVINGS = 5_000_000; // the payer's balance from earlier top-ups

const TOKEN_ABI = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
]);

describe("attack: an exact payment rebuilt from its settle transaction spends the payer's balance (sqlite)", () => {
  let h: PayPerRequestHarness;
  before(async () => {
    h = await startPayPerRequestHarness('sqlite');
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  /** What an observer reads off the chain: the last transferWithAuthorization sent to the USDC contract. */
  async function authorizationFromChain() {
    const chain = createPublicClient({ transport: http(h.anvil.rpcUrl) });
    const head = await chain.getBlockNumber();
    for (let n = head; n >= 0n && n > head - 20n; n--) {
      const block = await chain.getBlock({ blockNumber: n, includeTransactions: true });
      for (const tx of [...block.transactions].reverse()) {
        if (tx.to?.toLowerCase() !== h.chain.usdc.toLowerCase()) continue;
        let call;
        try {
          call = decodeFunctionData({ abi: TOKEN_ABI, data: tx.input });
        } catch {
          continue;
        }
        if (call.functionName !== 'transferWithAuthorization') continue;
        const a = call.args as readonly unknown[];
        const signature = a.length === 7 ? (a[6] as Hex) : serializeSignature({ v: BigInt(a[6] as number), r: a[7] as Hex, s: a[8] as Hex });
        const [from, to, value, validAfter, validBefore, nonce] = a as [string, string, bigint, bigint, bigint, Hex];
        return {
          signature,
          authorization: { from, to, value: value.toString(), validAfter: validAfter.toString(), validBefore: validBefore.toString(), nonce },
        };
      }
    }
    throw new Error('no transferWithAuthorization on chain');
  }

  test("a chain observer runs its own request on the payer's balance with the header rebuilt from calldata", async () => {
    const payer = await h.payer(1n);
    await adjustBalance(h.gw.services.storage.db, { wallet: payer.address.toLowerCase(), amountUsdc: SAVINGS, note: 'earlier top-ups' });
    // The payer's own paid request, with the stock client: settled, credited, run.
    await h.openai(payer).chat.completions.create(BODY as never);
    const left = await h.balance(payer.address);
    const calls = h.fake.received.length;

    // The observer: the settle's calldata and the gateway's public offer for that amount.
    const seen = await authorizationFromChain();
    assert.equal(seen.authorization.from.toLowerCase(), payer.address.toLowerCase());
    const offer = (await h.chat(ATTACKER_BODY)).body.accepts[0] as PaymentRequirements;
    const header = v2Header({ ...offer, amount: seen.authorization.value }, seen);

    const stolen = await h.chat(ATTACKER_BODY, { 'payment-signature': header });
    assert.notEqual(stolen.status, 200, `the observer's request ran on the payer's balance (charged ${stolen.headers.get('x-tollgate-charged-usdc')} µ)`);
    assert.equal(stolen.status, 402, stolen.text);
    assert.equal(stolen.body.error, 'PAYMENT_REJECTED');
    assert.equal(stolen.body.reason, 'payment_for_another_request');
    assert.equal(h.fake.received.length, calls, 'the observer reached the provider');
    assert.equal(await h.balance(payer.address), left, "the payer's balance paid for the observer's request");

    // The same header with the payer's own body (which the observer does not know) is the payer's
    // resend: it runs, charged to the balance as before, and credits nothing more.
    const resent = await h.chat(BODY, { 'payment-signature': header });
    assert.equal(resent.status, 200, resent.text);
    assert.equal(h.fake.received.length, calls + 1);
    assert.equal(await h.balance(payer.address), left - Number(resent.headers.get('x-tollgate-charged-usdc')));
  });

  test('a failed payment reclaimed with another body credits the payer and runs nothing; the first body still runs', async () => {
    const payer = await h.payer(1n);
    const offer = (await h.chat(BODY)).body.accepts[0] as PaymentRequirements;
    const header = v2Header(offer, await h.usdcPayment(payer, BigInt(offer.amount)));
    const f = h.gw.services.topup!.facilitator as { verify: (...a: unknown[]) => Promise<unknown> };
    const realVerify = f.verify;
    f.verify = async () => {
      throw new FacilitatorUnavailable('facilitator down (test)');
    };
    try {
      assert.equal((await h.chat(BODY, { 'payment-signature': header })).status, 503);
    } finally {
      f.verify = realVerify;
    }
    const calls = h.fake.received.length;
    // Another body reclaims the failed row (failed -> pending), so this request opens it: settled and
    // credited to the payer, whose money it is, but the observer's prompt does not run.
    const other = await h.chat(ATTACKER_BODY, { 'payment-signature': header });
    assert.equal(other.status, 402, other.text);
    assert.equal(other.body.reason, 'payment_for_another_request');
    assert.equal(h.fake.received.length, calls);
    assert.equal(await h.balance(payer.address), Number(offer.amount));
    // The payer's own request, sent again: it runs on what was credited.
    const own = await h.chat(BODY, { 'payment-signature': header });
    assert.equal(own.status, 200, own.text);
    assert.equal(h.fake.received.length, calls + 1);
    await h.gw.assertLedger();
  });
});
