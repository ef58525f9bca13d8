/**
 * Compiles Tollgate's own local-chain contracts (contracts/*.sol) with solc-js and writes the
 * artifacts the chain harness deploys (src/devchain/artifacts.json). The artifacts are committed so
 * tests and the demo do not pay solc's start-up on every run; a test recompiles and compares, so
 * the cache cannot drift from the sources.
 *
 * Run with: npm run contracts
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CONTRACT_SOURCES = [
  'TetherLikeToken.sol',
  'StandInPermit2ProxyBase.sol',
  'StandInExactPermit2Proxy.sol',
  'StandInUptoPermit2Proxy.sol',
  'StandInBatchSettlementCollectors.sol',
  'StandInBatchSettlement.sol',
  'TestSmartWallet.sol',
];
export const ARTIFACTS_PATH = path.join(ROOT, 'src/devchain/artifacts.json');

export interface CompiledContract {
  abi: unknown[];
  bytecode: `0x${string}`;
  deployedBytecode: `0x${string}`;
}

interface SolcOutput {
  errors?: Array<{ severity: string; formattedMessage: string }>;
  contracts: Record<string, Record<string, { abi: unknown[]; evm: { bytecode: { object: string }; deployedBytecode: { object: string } } }>>;
}

export function compileContracts(): Record<string, CompiledContract> {
  // solc is a dev dependency with no types; its compile() takes and returns standard JSON.
  const solc = createRequire(import.meta.url)('solc') as { compile(input: string): string; version(): string };
  const sources = Object.fromEntries(CONTRACT_SOURCES.map((file) => [file, { content: readFileSync(path.join(ROOT, 'contracts', file), 'utf8') }]));
  const input = {
    language: 'Solidity',
    sources,
    settings: {
      optimizer: { enabled: true, runs: 200 },
      metadata: { bytecodeHash: 'none' },
      outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input))) as SolcOutput;
  const errors = (output.errors ?? []).filter((e) => e.severity === 'error');
  if (errors.length > 0) throw new Error(errors.map((e) => e.formattedMessage).join('\n'));
  const result: Record<string, CompiledContract> = {};
  for (const file of CONTRACT_SOURCES) {
    for (const [name, contract] of Object.entries(output.contracts[file] ?? {})) {
      if (contract.evm.bytecode.object === '') continue; // interfaces
      result[name] = {
        abi: contract.abi,
        bytecode: `0x${contract.evm.bytecode.object}`,
        deployedBytecode: `0x${contract.evm.deployedBytecode.object}`,
      };
    }
  }
  return result;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const compiled = compileContracts();
  writeFileSync(ARTIFACTS_PATH, `${JSON.stringify(compiled, null, 1)}\n`);
  console.log(`wrote ${Object.keys(compiled).join(', ')} to ${path.relative(ROOT, ARTIFACTS_PATH)}`);
}
