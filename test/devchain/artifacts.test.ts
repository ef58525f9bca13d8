import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ARTIFACTS_PATH, compileContracts } from '../../src/devchain/compile-contracts.ts';

test('the committed contract artifacts are exactly what contracts/*.sol compiles to (run `npm run contracts` after editing)', () => {
  const committed = JSON.parse(readFileSync(ARTIFACTS_PATH, 'utf8'));
  const fresh = JSON.parse(JSON.stringify(compileContracts()));
  assert.deepEqual(Object.keys(committed).sort(), Object.keys(fresh).sort());
  for (const name of Object.keys(fresh)) {
    assert.equal(committed[name].bytecode, fresh[name].bytecode, `${name} bytecode is stale`);
    assert.deepEqual(committed[name].abi, fresh[name].abi, `${name} ABI is stale`);
  }
});
