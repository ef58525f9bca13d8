import { createSiweMessage, generateSiweNonce } from 'viem/siwe';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Address, Hex } from 'viem';
import { TEST_DOMAIN, TEST_ORIGIN } from './gateway.ts';
import { ACTIONS, type SiweAction } from '../../src/siwe/actions.ts';

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
  /**
   * Sign the statement of this action (src/siwe/actions.ts); without it, nor `statement`, the legacy
   * "Manage my Tollgate API keys" (list, revoke, tighten, read).
   */
  action?: SiweAction;
  /** The gateway's dashboard.sessionMinutes, named by the sign-in statement (default 30). */
  sessionMinutes?: number;
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
    statement: o.statement ?? (o.action ? ACTIONS[o.action].statement(o.sessionMinutes ?? 30) : 'Manage my Tollgate API keys'),
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

/** A proof signed for creating an API key (the only proof POST /v1/auth/keys accepts). */
export const createKeyProof = (account: PrivateKeyAccount | { address: Address }, o: ProofOptions = {}) => siweProof(account, { ...o, action: 'create-key' });

/** A proof signed for opening a dashboard session (the only proof POST /v1/auth/session accepts). */
export const signInProof = (account: PrivateKeyAccount | { address: Address }, o: ProofOptions = {}) => siweProof(account, { ...o, action: 'sign-in' });
