import { createSiweMessage, generateSiweNonce } from 'viem/siwe';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Address, Hex } from 'viem';
import { TEST_DOMAIN, TEST_ORIGIN } from './gateway.ts';

export function newAccount(): PrivateKeyAccount {
  return privateKeyToAccount(generatePrivateKey());
}

export interface ProofOptions {
  domain?: string;
  uri?: string;
  chainId?: number;
  issuedAt?: Date;
  expirationTime?: Date;
  notBefore?: Date;
  nonce?: string;
  statement?: string;
  /** Sign with this account instead of the one named in the message (a contract wallet's owner). */
  signer?: PrivateKeyAccount;
  /** Post-processes the signature (e.g. wraps it in ERC-6492 for an undeployed wallet). */
  wrapSignature?: (signature: Hex) => Hex;
}

/** A real EIP-4361 message built by viem's createSiweMessage and signed by a viem account (EIP-191). */
export async function siweProof(account: PrivateKeyAccount | { address: Address }, o: ProofOptions = {}): Promise<{ message: string; signature: string }> {
  const message = createSiweMessage({
    domain: o.domain ?? TEST_DOMAIN,
    address: account.address,
    statement: o.statement ?? 'Manage my Tollgate API keys',
    uri: o.uri ?? TEST_ORIGIN,
    version: '1',
    chainId: o.chainId ?? 8453,
    nonce: o.nonce ?? generateSiweNonce(),
    issuedAt: o.issuedAt ?? new Date(),
    expirationTime: o.expirationTime,
    notBefore: o.notBefore,
  });
  const signer = o.signer ?? (account as PrivateKeyAccount);
  const signature = await signer.signMessage({ message });
  return { message, signature: o.wrapSignature ? o.wrapSignature(signature) : signature };
}

export function proofQuery(p: { message: string; signature: string }): string {
  return `message=${encodeURIComponent(p.message)}&signature=${encodeURIComponent(p.signature)}`;
}
