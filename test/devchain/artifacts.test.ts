import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { createPublicClient, hashDomain, http, keccak256, parseAbi, type Hex } from 'viem';
import { ARTIFACTS_PATH, compileContracts } from '../../src/devchain/compile-contracts.ts';
import { startAnvil } from '../../src/devchain/anvil.ts';
import { PERMIT2_ADDRESS } from '../../src/devchain/deploy.ts';
import permit2 from '../../src/devchain/permit2.json' with { type: 'json' };

test('the committed contract artifacts are exactly what contracts/*.sol compiles to (run `npm run contracts` after editing)', () => {
  const committed = JSON.parse(readFileSync(ARTIFACTS_PATH, 'utf8'));
  const fresh = JSON.parse(JSON.stringify(compileContracts()));
  assert.deepEqual(Object.keys(committed).sort(), Object.keys(fresh).sort());
  for (const name of Object.keys(fresh)) {
    assert.equal(committed[name].bytecode, fresh[name].bytecode, `${name} bytecode is stale`);
    assert.deepEqual(committed[name].abi, fresh[name].abi, `${name} ABI is stale`);
  }
});

test('the checked-in Permit2 runtime code is intact and is Permit2: on a chain it answers with its own EIP-712 domain', async (t) => {
  assert.equal(
    keccak256(permit2.runtimeCode as Hex),
    permit2.codeKeccak256,
    'src/devchain/permit2.json was edited: runtimeCode no longer hashes to codeKeccak256',
  );
  const anvil = await startAnvil();
  t.after(() => anvil.stop());
  await anvil.rpc('anvil_setCode', [PERMIT2_ADDRESS, permit2.runtimeCode]);
  const client = createPublicClient({ transport: http(anvil.rpcUrl) });
  const separator = await client.readContract({
    address: PERMIT2_ADDRESS,
    abi: parseAbi(['function DOMAIN_SEPARATOR() view returns (bytes32)']),
    functionName: 'DOMAIN_SEPARATOR',
  });
  // Permit2's domain has a name and no version (Permit2's EIP712.sol); any other code fails this.
  const expected = hashDomain({
    domain: { name: 'Permit2', chainId: BigInt(anvil.chainId), verifyingContract: PERMIT2_ADDRESS },
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
    },
  });
  assert.equal(separator, expected);
});
