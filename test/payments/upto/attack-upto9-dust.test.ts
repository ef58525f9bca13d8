import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Hex } from 'viem';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { settledUpto, UPTO_BODY, uptoOpenAI, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * Exact pay-per-request never takes less than payPerRequest.minUsd (0.01 USD by default) per
 * payment: that floor is what pays for the relayer's settlement gas. The upto offer is the bare
 * reservation ("not rounded to minUsd") and the gateway settles exactly the charge, however small,
 * with a relayer-paid transaction whenever it is above 0. A payer sending one-token requests gets
 * an on-chain settlement (about 80-100k gas, paid by the operator) for a few dozen micro-USDC each:
 * a relayer drain bounded only by the per-wallet rate limit, and unbounded across wallets.
 */
for (const engine of ENGINES) {
  describe(`attack: dust upto settles paid for by the relayer's gas (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('a request charged far below payPerRequest.minUsd is still settled by a relayer transaction', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const nonce = () => h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, 'latest']).then(Number);
      const before = await nonce();
      await uptoOpenAI(h, payer).chat.completions.create({ ...UPTO_BODY, max_tokens: 1 });
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      const charge = BigInt(row.settle_amount_atomic!);
      const sent = (await nonce()) - before;
      let gas = 0n;
      if (row.tx_hash) gas = BigInt((await h.anvil.rpc<{ gasUsed: Hex }>('eth_getTransactionReceipt', [row.tx_hash])).gasUsed);
      await assertLedgerConsistent(h.gw.services.storage.db);
      const minAtomic = 10_000n; // payPerRequest.minUsd 0.01 in USDT units (6 decimals)
      assert.ok(
        sent === 0 || charge >= minAtomic,
        `the relayer sent ${sent} transaction(s) (${gas} gas) to collect ${charge} token units (${Number(charge) / 1e6} USD), below the ${Number(minAtomic) / 1e6} USD floor every exact payment pays`,
      );
    });
  });
}
