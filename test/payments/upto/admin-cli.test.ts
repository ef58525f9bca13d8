import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { runTollgate } from '../../support/cli.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { operatorConfig, settledUpto, streamAndRevoke, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * The operator's side of an unsettled upto payment, through the `tollgate` command as an operator
 * runs it (docs/operations.md, "Unsettled upto payments"): ledger-check lists it, `admin upto retry`
 * fails while the allowance is still revoked and settles the same amount once it is back,
 * `admin upto write-off` needs a reason and writes off once.
 */
for (const engine of ENGINES) {
  describe(`tollgate admin upto and ledger-check (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('listed by ledger-check; retry settles once the allowance is back; write-off needs a reason and runs once', async () => {
      const h = harness();
      const op = operatorConfig(h);
      try {
        const payer = await uptoPayer(h);
        await streamAndRevoke(h, payer);
        const first = await settledUpto(h, payer);
        assert.equal(first.upto_state, 'unsettled');

        const listed = await runTollgate(['admin', 'ledger-check', '--chain'], op.env);
        assert.equal(listed.code, 0, listed.stdout + listed.stderr);
        assert.match(
          listed.stdout,
          new RegExp(`upto payment ${first.id} \\(wallet ${payer.address.toLowerCase()}\\): charged \\d+ micro-USDC, not settled on chain`),
        );

        const still = await runTollgate(['admin', 'upto', 'retry', first.id], op.env);
        assert.equal(still.code, 1, still.stdout + still.stderr);
        assert.match(still.stdout, new RegExp(`payment ${first.id}: unsettled`));
        await h.chain.approvePermit2(payer, h.chain.usdt);
        const retried = await runTollgate(['admin', 'upto', 'retry', first.id], op.env);
        assert.equal(retried.code, 0, retried.stdout + retried.stderr);
        assert.match(retried.stdout, new RegExp(`payment ${first.id}: settled \\(0x[0-9a-f]{64}\\)`));
        assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(first.settle_amount_atomic!));
        const again = await runTollgate(['admin', 'upto', 'retry', first.id], op.env);
        assert.equal(again.code, 2);
        assert.match(again.stderr, /is settled, not unsettled; nothing was changed/);

        await streamAndRevoke(h, payer);
        const second = await settledUpto(h, payer);
        assert.equal(second.upto_state, 'unsettled');
        const noReason = await runTollgate(['admin', 'upto', 'write-off', second.id, '--reason', ' '], op.env);
        assert.equal(noReason.code, 2);
        assert.match(noReason.stderr, /--reason must say why/);
        const off = await runTollgate(['admin', 'upto', 'write-off', second.id, '--reason', 'payer unreachable'], op.env);
        assert.equal(off.code, 0, off.stdout + off.stderr);
        assert.match(off.stdout, /written off \(written off: payer unreachable\)/);
        const twice = await runTollgate(['admin', 'upto', 'write-off', second.id, '--reason', 'again'], op.env);
        assert.equal(twice.code, 2);
        const unknown = await runTollgate(['admin', 'upto', 'write-off', 'no-such-payment', '--reason', 'x'], op.env);
        assert.equal(unknown.code, 2);
        assert.match(unknown.stderr, /no payment no-such-payment/);
        const books = await runTollgate(['admin', 'ledger-check', '--chain'], op.env);
        assert.equal(books.code, 0, books.stdout);
        assert.match(books.stdout, new RegExp(`upto payment ${second.id} .*written off`));
        await assertLedgerConsistent(h.gw.services.storage.db);
      } finally {
        op.done();
      }
    });
  });
}
