import { defineChain, type Chain } from 'viem';

/** A viem chain for any chain id and RPC URL (viem's catalogue is not needed, nor always right). */
export function evmChain(id: number, rpcUrl: string, name = `eip155:${id}`): Chain {
  return defineChain({ id, name, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
}
