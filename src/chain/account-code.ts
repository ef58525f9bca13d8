import type { Hex, PublicClient } from 'viem';

/**
 * What sits at an address on one chain, as far as identity is concerned:
 * - none: no code; only the address's private key can sign for it (an EOA), or nothing yet;
 * - delegated: an EOA with an EIP-7702 delegation (code = 0xef0100 || delegate). Only the key can set
 *   or change the delegation, on every chain, so such an account is judged by its key alone;
 * - contract: any other code. Whoever deployed it controls it, and that may be someone else on
 *   another chain (CREATE addresses, factories whose address does not commit to the owner).
 */
export type AccountCode = 'none' | 'delegated' | 'contract';

/** EIP-7702 delegation designator: 0xef0100 followed by the 20-byte delegate address. */
const DELEGATION = /^0xef0100[0-9a-f]{40}$/i;

export function classifyCode(code: Hex | undefined): AccountCode {
  if (code === undefined || code === '0x') return 'none';
  return DELEGATION.test(code) ? 'delegated' : 'contract';
}

/** Reads the code at `address`; an RPC failure is thrown for the caller to turn into a 503. */
export async function accountCode(client: PublicClient, address: Hex): Promise<AccountCode> {
  return classifyCode(await client.getCode({ address }));
}
