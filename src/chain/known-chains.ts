/**
 * Names of the EVM chains a gateway is likely to be paid on, by chain id, and whether real money
 * moves on them. The dashboard shows the name instead of a bare id (an operator may name any
 * other chain with `chains.<id>.name`), and `tollgate serve --fake-providers` refuses to sell canned
 * answers for stablecoins on a chain that is not a known test or local chain.
 */
export interface KnownChain {
  name: string;
  /** A test network or a local development chain: its tokens are worth nothing. */
  testnet: boolean;
}

export const KNOWN_CHAINS: Readonly<Record<number, KnownChain>> = Object.freeze({
  1: { name: 'Ethereum', testnet: false },
  10: { name: 'OP Mainnet', testnet: false },
  56: { name: 'BNB Smart Chain', testnet: false },
  130: { name: 'Unichain', testnet: false },
  137: { name: 'Polygon', testnet: false },
  480: { name: 'World Chain', testnet: false },
  1329: { name: 'Sei', testnet: false },
  8453: { name: 'Base', testnet: false },
  42161: { name: 'Arbitrum One', testnet: false },
  43114: { name: 'Avalanche C-Chain', testnet: false },
  59144: { name: 'Linea', testnet: false },
  1328: { name: 'Sei Testnet', testnet: true },
  1337: { name: 'local dev chain', testnet: true },
  31337: { name: 'Anvil (local)', testnet: true },
  43113: { name: 'Avalanche Fuji', testnet: true },
  80002: { name: 'Polygon Amoy', testnet: true },
  84532: { name: 'Base Sepolia', testnet: true },
  421614: { name: 'Arbitrum Sepolia', testnet: true },
  11155111: { name: 'Sepolia', testnet: true },
  11155420: { name: 'OP Sepolia', testnet: true },
});

/** The chain's name: the operator's, else the table's, else "chain <id>". */
export function chainName(chainId: number, configured?: string | null): string {
  return configured || KNOWN_CHAINS[chainId]?.name || `chain ${chainId}`;
}

/** Token symbols by the EIP-712 domain name a stablecoin signs with (the name an offer is configured with). */
const SYMBOLS: Readonly<Record<string, string>> = Object.freeze({
  'USD Coin': 'USDC',
  USDC: 'USDC',
  'Tether USD': 'USDT',
  USDT0: 'USDT0',
  'Dai Stablecoin': 'DAI',
  'PayPal USD': 'PYUSD',
});

/** The symbol people know a token by (USDC), or its domain name when the table has none. */
export const tokenSymbol = (domainName: string): string => SYMBOLS[domainName] ?? domainName;
