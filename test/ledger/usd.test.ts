import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { microToUsd, usdToMicro } from '../../src/ledger/usd.ts';

/** Decimal USD text to integer micro-USDC and back, never through a float. */
describe('usdToMicro and microToUsd', () => {
  test('decimal text becomes exact micro-USDC', () => {
    assert.equal(usdToMicro('5'), 5_000_000);
    assert.equal(usdToMicro('0.25'), 250_000);
    assert.equal(usdToMicro('0.000001'), 1);
    assert.equal(usdToMicro('-3.5'), -3_500_000);
    assert.equal(usdToMicro(' 1.1 '), 1_100_000);
    // 0.1 + 0.2 is not 0.3 in floating point; the text is parsed as digits.
    assert.equal(usdToMicro('0.3'), 300_000);
  });

  test('text that is not an amount with at most 6 decimals is refused with a message naming it', () => {
    for (const bad of ['', '1.', '.5', '1.0000001', '1e3', '0x10', '1,5', '--1', 'NaN', 'Infinity', '+1']) {
      assert.throws(
        () => usdToMicro(bad),
        (err: Error) => err instanceof RangeError && err.message.includes(`"${bad}"`),
        bad,
      );
    }
  });

  test('an amount too large for an exact integer is refused', () => {
    assert.throws(() => usdToMicro('9007199254.740993'), /too large/);
    assert.equal(usdToMicro('9007199254.740991'), Number.MAX_SAFE_INTEGER);
  });

  test('microToUsd prints six decimals, and reads back to the same number', () => {
    assert.equal(microToUsd(1), '0.000001');
    assert.equal(microToUsd(-2_500_000), '-2.500000');
    assert.equal(microToUsd(0), '0.000000');
    fc.assert(fc.property(fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }), (micro) => usdToMicro(microToUsd(micro)) === micro));
  });
});
