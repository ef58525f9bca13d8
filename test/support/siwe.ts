import { SiweMessage, generateNonce } from 'siwe';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
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
  /** Sign with this account instead of the one named in the message. */
  signer?: PrivateKeyAccount;
}

/** A real EIP-4361 message built by the `siwe` package and signed by a viem account (EIP-191). */
export async function siweProof(account: PrivateKeyAccount, o: ProofOptions = {}): Promise<{ message: string; signature: string }> {
  const message = new SiweMessage({
    domain: o.domain ?? TEST_DOMAIN,
    address: account.address,
    statement: o.statement ?? 'Manage my Tollgate API keys',
    uri: o.uri ?? TEST_ORIGIN,
    version: '1',
    chainId: o.chainId ?? 8453,
    nonce: o.nonce ?? generateNonce(),
    issuedAt: (o.issuedAt ?? new Date()).toISOString(),
    expirationTime: o.expirationTime?.toISOString(),
    notBefore: o.notBefore?.toISOString(),
  }).prepareMessage();
  const signature = await (o.signer ?? account).signMessage({ message });
  return { message, signature };
}

export function proofQuery(p: { message: string; signature: string }): string {
  return `message=${encodeURIComponent(p.message)}&signature=${encodeURIComponent(p.signature)}`;
}
