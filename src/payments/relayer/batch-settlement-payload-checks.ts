import type { ChannelConfig } from '@x402/evm';
import { isBatchSettlementClaimPayload, isBatchSettlementEnrichedRefundPayload } from '@x402/evm';
import { size, zeroAddress, type Hex } from 'viem';

/** Half the secp256k1 order: x402BatchSettlement recovers only signatures with s at most this (no malleable twin). */
const HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;
const UINT128_MAX = 2n ** 128n - 1n;
const UINT256_MAX = 2n ** 256n - 1n;

/**
 * Whether the contract can recover an ECDSA voucher signature: 65 bytes, v of 27 or 28, low s. viem's
 * verifyTypedData (the package's verify) also accepts v of 0/1 and a high-s copy; the contract (like the
 * reference's OpenZeppelin ECDSA) refuses both, so a voucher verified on viem's word would serve a
 * request the claim then cannot collect, and would revert the whole claim batch it sits in.
 */
export function ecdsaRecoverableOnchain(signature: string): boolean {
  if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return false;
  const v = Number.parseInt(signature.slice(130, 132), 16);
  return (v === 27 || v === 28) && BigInt(`0x${signature.slice(66, 130)}`) <= HALF_ORDER;
}

/**
 * Whether the contract checks this voucher signature by ECDSA recovery: always when the channel has a
 * payerAuthorizer (the spec: ECDSA only); for the payer itself when it is an EOA and the signature is a
 * plain 65 bytes (a smart wallet judges its own signatures by ERC-1271, and an ERC-6492 one is longer).
 */
export async function recoveredByEcdsa(config: ChannelConfig, signature: string, codeAt: (address: Hex) => Promise<Hex | undefined>): Promise<boolean> {
  if (config.payerAuthorizer.toLowerCase() !== zeroAddress) return true;
  if (!/^0x[0-9a-fA-F]*$/.test(signature) || size(signature as Hex) !== 65) return false;
  const code = await codeAt(config.payer as Hex);
  return code === undefined || code === '0x';
}

const within = (value: unknown, max: bigint) => typeof value === 'string' && /^\d{1,78}$/.test(value) && BigInt(value) <= max;

/**
 * The spec's claim_payload/refund_payload code when an amount of a claim or refund payload is not a
 * decimal integer in its Solidity type (uint128 totals and ceilings, uint256 nonce); undefined when all fit.
 * viem would throw encoding them, out of the facilitator, instead of the payload being refused.
 */
export function amountOutOfRange(inner: Record<string, unknown>): string | undefined {
  const rowsFit = (claims: unknown) =>
    Array.isArray(claims) &&
    claims.every((c) => within(c?.voucher?.maxClaimableAmount, UINT128_MAX) && within(c?.totalClaimed, UINT128_MAX) && typeof c?.voucher?.channel === 'object');
  if (isBatchSettlementEnrichedRefundPayload(inner)) {
    const fits = rowsFit(inner.claims) && within(inner.amount, UINT128_MAX) && within(inner.refundNonce, UINT256_MAX);
    return fits && within(inner.voucher.maxClaimableAmount, UINT128_MAX) ? undefined : 'invalid_batch_settlement_evm_refund_payload';
  }
  if (isBatchSettlementClaimPayload(inner)) return rowsFit(inner.claims) ? undefined : 'invalid_batch_settlement_evm_claim_payload';
  return undefined;
}
