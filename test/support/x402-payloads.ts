import { randomBytes } from 'node:crypto';
import { permit2WitnessTypes, authorizationTypes } from '@x402/evm';
import type { PaymentRequirements } from '@x402/core/types';
import type { Address, Hex, PrivateKeyAccount } from 'viem';
import { PERMIT2_ADDRESS, X402_EXACT_PERMIT2_PROXY } from '../../src/devchain/deploy.ts';

/**
 * Payment payloads signed by hand with viem, for the cases a well-behaved client never sends:
 * expired, signed by the wrong key, tampered, or replayed. The signatures are real.
 */
export interface Eip3009Terms {
  token: Address;
  chainId: number;
  domain: { name: string; version: string };
  /** The payer: an account, or a contract wallet's address (then `signer` is its owner). */
  from: PrivateKeyAccount | { address: Address };
  /** Defaults to `from`; set it to sign for someone else. */
  signer?: PrivateKeyAccount;
  /** Post-processes the signature (e.g. wraps it in ERC-6492 for an undeployed wallet). */
  wrapSignature?: (signature: Hex) => Hex;
  to: Address;
  value: bigint;
  validAfter?: bigint;
  validBefore?: bigint;
  nonce?: Hex;
}

export async function signEip3009(t: Eip3009Terms) {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const authorization = {
    from: t.from.address,
    to: t.to,
    value: t.value,
    validAfter: t.validAfter ?? 0n,
    validBefore: t.validBefore ?? now + 300n,
    nonce: t.nonce ?? (`0x${randomBytes(32).toString('hex')}` as Hex),
  };
  const raw = await (t.signer ?? (t.from as PrivateKeyAccount)).signTypedData({
    domain: { ...t.domain, chainId: t.chainId, verifyingContract: t.token },
    types: authorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message: authorization,
  });
  const signature = t.wrapSignature ? t.wrapSignature(raw) : raw;
  return {
    signature,
    authorization: {
      from: authorization.from,
      to: authorization.to,
      value: authorization.value.toString(),
      validAfter: authorization.validAfter.toString(),
      validBefore: authorization.validBefore.toString(),
      nonce: authorization.nonce,
    },
  };
}

export interface Permit2Terms {
  token: Address;
  chainId: number;
  from: PrivateKeyAccount;
  to: Address;
  amount: bigint;
  deadline?: bigint;
  /** Defaults to a random nonce; set it to sign other terms under a nonce already used. */
  nonce?: bigint;
}

export async function signPermit2(t: Permit2Terms) {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const message = {
    permitted: { token: t.token, amount: t.amount },
    spender: X402_EXACT_PERMIT2_PROXY,
    nonce: t.nonce ?? BigInt(`0x${randomBytes(16).toString('hex')}`),
    deadline: t.deadline ?? now + 300n,
    witness: { to: t.to, validAfter: 0n },
  };
  const signature = await t.from.signTypedData({
    domain: { name: 'Permit2', chainId: t.chainId, verifyingContract: PERMIT2_ADDRESS },
    types: permit2WitnessTypes,
    primaryType: 'PermitWitnessTransferFrom',
    message,
  });
  return {
    signature,
    permit2Authorization: {
      from: t.from.address,
      permitted: { token: t.token, amount: t.amount.toString() },
      spender: X402_EXACT_PERMIT2_PROXY,
      nonce: message.nonce.toString(),
      deadline: message.deadline.toString(),
      witness: { to: t.to, validAfter: '0' },
    },
  };
}

/** The x402 Permit2 proxy's `settle` arguments for a signed permit, to put it on chain by hand. */
export function permit2SettleArgs(p: Awaited<ReturnType<typeof signPermit2>>) {
  const a = p.permit2Authorization;
  return [
    { permitted: { token: a.permitted.token as Address, amount: BigInt(a.permitted.amount) }, nonce: BigInt(a.nonce), deadline: BigInt(a.deadline) },
    a.from as Address,
    { to: a.witness.to as Address, validAfter: BigInt(a.witness.validAfter) },
    p.signature,
  ] as const;
}

export const base64Json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');

/** A v2 PAYMENT-SIGNATURE value: the chosen requirement echoed back, plus the signed payload. */
export const v2Header = (accepted: PaymentRequirements, payload: unknown) => base64Json({ x402Version: 2, accepted, payload });

/** A v1 X-Payment value: network by name, no asset. */
export const v1Header = (network: string, payload: unknown) => base64Json({ x402Version: 1, scheme: 'exact', network, payload });
