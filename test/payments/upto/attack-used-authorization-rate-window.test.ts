import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { createKeyProof } from '../../support/siwe.ts';
import { USD } from '../../support/topup-harness.ts';
import { settledUpto, signedUptoHeader, UPTO_BODY, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * An upto authorization pays for one request only: sent again it is refused (`upto_authorization_used`)
 * and runs nothing. Like a leaked top-up header or an expired exact one (pay-per-request/purpose-attacks.test.ts),
 * such a header must not use up the payer's chat rate-limit window, which the wallet's API keys and
 * paid requests share. A request that failed at the provider settled 0, so nothing went on chain and
 * Permit2's nonce is still unspent: the facilitator's verify passes, and whoever holds the header (a
 * proxy's log, a leaked client trace) can send it again until its deadline.
 */
const PER_MINUTE = 3;

for (const engine of ENGINES) {
  describe(`attack: a used upto authorization sent again and the payer's rate-limit window (${engine})`, () => {
    const harness = uptoSuite(engine, { rateLimits: { chat: { perMinute: PER_MINUTE, perDay: 1_000 } } });

    const keyFor = async (h: PayPerRequestHarness, account: FundedAccount) => {
      const res = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
      assert.equal(res.status, 201, res.text);
      return res.body.key as string;
    };

    test("held: the wallet's window counts its upto requests with its keys' requests, and over it an upto request is refused before anything is held", async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const key = await keyFor(h, payer);
      // The key's request is counted before its body is read (it has no balance: a 402, counted all the same).
      assert.equal((await h.chat(UPTO_BODY, { authorization: `Bearer ${key}` })).status, 402);
      for (let i = 1; i < PER_MINUTE; i++) {
        await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
        await settledUpto(h, payer);
      }
      assert.equal((await h.chat(UPTO_BODY, { authorization: `Bearer ${key}` })).status, 429, 'the upto requests used up the key');
      const { header } = await signedUptoHeader(h, payer, UPTO_BODY);
      const over = await h.chat(UPTO_BODY, { 'payment-signature': header });
      assert.equal(over.status, 429, over.text);
      assert.equal((await uptoPayments(h, payer)).length, PER_MINUTE - 1, 'nothing recorded for the refused one');
      await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!);
    });

    test("an authorization settled for 0 (the provider failed), sent again: refused, and the payer's window is not used up", async () => {
      const h = harness();
      const victim = await uptoPayer(h);
      const key = await keyFor(h, victim);
      const { header } = await signedUptoHeader(h, victim, UPTO_BODY);
      h.fake.behaviour = { failStatus: 400 };
      try {
        const failed = await h.chat(UPTO_BODY, { 'payment-signature': header });
        assert.equal(failed.status, 502, failed.text);
      } finally {
        h.fake.behaviour = {};
      }
      const first = await settledUpto(h, victim);
      assert.equal(first.upto_state, 'settled');
      assert.equal(first.tx_hash, null, 'a charge of 0 sends nothing: the Permit2 nonce stays unspent');

      const calls = h.fake.received.length;
      const answers: string[] = [];
      for (let i = 0; i < PER_MINUTE; i++) {
        const replay = await h.chat(UPTO_BODY, { 'payment-signature': header });
        answers.push(`${replay.status} ${replay.body?.reason ?? replay.body?.error}`);
      }
      assert.equal(h.fake.received.length, calls, 'a used authorization reached the provider');
      // The victim used 1 of PER_MINUTE itself (the failed request); the refused replays ran nothing and must not count.
      const own = await h.chat(UPTO_BODY, { authorization: `Bearer ${key}` });
      assert.notEqual(
        own.status,
        429,
        `the victim's own key was rate-limited by replays of its used authorization (they saw ${answers.join(', ')}): ${own.text}`,
      );
      assert.deepEqual(answers, Array(PER_MINUTE).fill('402 upto_authorization_used'));
      assert.equal((await uptoPayments(h, victim)).length, 1, 'nothing more recorded');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, victim.address), 10n * USD, 'nothing moved on chain');
      await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!);
    });
  });
}
