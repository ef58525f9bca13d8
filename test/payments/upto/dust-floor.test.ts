import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { settledUpto, UPTO_BODY, uptoOpenAI, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * Exact pay-per-request never takes less than payPerRequest.minUsd (0.01 USD by default) per
 * payment: that floor is what pays for the relayer's settlement gas. The upto offer is the bare
 * reservation ("not rounded to minUsd") and the gateway settles exactly the charge, however small,
 * with a relayer-paid transaction whenever it is above 0. A payer sending one-token requests gets
 * an on-chain settlement (about 80-100k gas, paid by the operator) for a few dozen micro-USDC each:
 * a relayer drain bounded only by the per-wallet rate limit, and unbounded across wallets.
 *
 * Fixed (docs/DECISIONS.md, "The upto floor"): a request charged anything is billed at least
 * min(payPerRequest.minUsd, its reservation), stated in the 402 (`upto_min_charge_usdc`); the
 * ledger's charge, the answer's charge and the amount settled are that one number. The reviewer's
 * assertion ("no transaction, or at least the floor") is now exact: the charge is the floor, and a
 * request that produced nothing settles 0 and sends nothing.
 */
for (const engine of ENGINES) {
  describe(`attack: dust upto settles paid for by the relayer's gas (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('a one-token request is charged and settled the floor; a request that produced nothing sends nothing', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const nonce = () => h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, 'latest']).then(Number);
      const body = { ...UPTO_BODY, max_tokens: 1 };
      const asked = await h.chat(body);
      const floor = Number(asked.body.upto_min_charge_usdc);
      assert.equal(floor, Math.min(10_000, Number(asked.body.reserved_usdc)), 'the 402 states the floor: min(payPerRequest.minUsd, the reservation)');

      const { response } = await uptoOpenAI(h, payer).chat.completions.create(body).withResponse();
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      assert.equal(Number(response.headers.get('x-tollgate-charged-usdc')), floor, "the answer's charge is the floor");
      assert.equal(row.settle_amount_atomic, String(floor), 'the amount settled is the floor (USDT: 6 decimals)');
      assert.equal(row.onchain_amount_atomic, String(floor));
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(floor));

      const before = await nonce();
      h.fake.behaviour = { failStatus: 400 };
      try {
        await assert.rejects(uptoOpenAI(h, payer).chat.completions.create(body));
      } finally {
        h.fake.behaviour = {};
      }
      const nothing = await settledUpto(h, payer);
      assert.notEqual(nothing.id, row.id);
      assert.equal(nothing.upto_state, 'settled');
      assert.equal(nothing.settle_amount_atomic, '0');
      assert.equal((await nonce()) - before, 0, 'a request that produced nothing sends no transaction');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
