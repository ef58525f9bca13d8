import { authorizationTypes, PERMIT2_ADDRESS, permit2WitnessTypes } from '@x402/evm';
import { hashTypedData, isAddressEqual, isErc6492Signature, recoverAddress, type Hex, type PublicClient } from 'viem';
import { accountCode } from '../chain/account-code.ts';
import { isTransportError } from '../chain/rpc-errors.ts';
import { eip3009Payload, permit2Payload } from './decode.ts';
import type { MatchedPayment } from './match.ts';

/**
 * Did the payer named in the payment sign it? Checked BEFORE anything is recorded
 * (settle-topup.ts), so that a payment row is only ever created by a payload the payer signed.
 * A tampered copy of someone's header (one byte of the signature changed, sent ahead of the real
 * one), recorded first, would hold the row under the real authorization's nonce; the real payment
 * would be a "conflict" for good, and if anyone put the real authorization on chain the payer's
 * money would reach payTo and never be credited.
 *
 * Cost: an EOA's signature is recovered locally (EIP-712 hash + ecrecover in process, no RPC). Only
 * a signature that is not its key's own canonical signature costs a read: the payer's code (one
 * `eth_getCode`), and for a contract wallet its ERC-1271 answer (one `eth_call`), or for an ERC-6492
 * signature (wallet not deployed yet) viem's deployless universal validator (one `eth_call`).
 *
 * Canonical means what the token accepts on chain (see isCanonical): a high-s or v 0/1 copy of a
 * real EIP-3009 signature recovers to the payer in most libraries, but USDC refuses it on chain:
 * recorded, it would hold the nonce like a tampered copy. No wallet produces one.
 *
 * RPC failures are thrown (the caller answers 503, nothing recorded); false means "not signed by
 * the payer".
 */
export async function signedByPayer(client: PublicClient, m: MatchedPayment): Promise<boolean> {
  const typed = typedDataOf(m);
  const payer = m.identity.payer as Hex;
  const signature = String(m.payload.payload.signature).toLowerCase() as Hex;
  let digest: Hex;
  try {
    digest = hashTypedData(typed as Parameters<typeof hashTypedData>[0]);
  } catch {
    return false;
  }
  if (isCanonical(signature, m.identity.method) && (await recovers(digest, signature, payer))) return true;
  if (isErc6492Signature(signature)) {
    // A wallet not deployed yet: viem's universal validator simulates the deployment and asks the
    // wallet (ERC-1271). Its own fallback (plain recovery) is for EOAs, whose 6492 form we refuse:
    // an EOA has no code, so the wallet's answer is the only one that counts here.
    return withRpc(() => client.verifyTypedData({ address: payer, ...(typed as object), signature } as Parameters<typeof client.verifyTypedData>[0]));
  }
  // A key's address with no code: only a canonical signature of its key counts (checked above).
  if ((await accountCode(client, payer)) === 'none') return false;
  // A contract wallet or an EIP-7702 account: the wallet decides (ERC-1271).
  return withRpc(async () => {
    const magic = await client.readContract({ address: payer, abi: ERC1271_ABI, functionName: 'isValidSignature', args: [digest, signature] });
    return String(magic).toLowerCase() === ERC1271_MAGIC;
  });
}

/** A revert or a malformed answer is "not valid"; an RPC that did not answer is thrown. */
async function withRpc(check: () => Promise<boolean>): Promise<boolean> {
  try {
    return await check();
  } catch (err) {
    if (isTransportError(err)) throw err;
    return false;
  }
}

const ERC1271_MAGIC = '0x1626ba7e';
const ERC1271_ABI = [
  {
    name: 'isValidSignature',
    type: 'function',
    stateMutability: 'view',
    inputs: [
      { name: 'hash', type: 'bytes32' },
      { name: 'signature', type: 'bytes' },
    ],
    outputs: [{ name: '', type: 'bytes4' }],
  },
] as const;

const HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/**
 * A signature the token's own check accepts for an EOA: 65 bytes and v 27 or 28 (Permit2 and USDC
 * both refuse v 0/1), and for EIP-3009 a low s (USDC's ECRecover refuses a high one; Permit2 takes
 * it, so a high-s permit is a valid permit and is recorded like any other).
 */
function isCanonical(signature: Hex, method: MatchedPayment['identity']['method']): boolean {
  if (!/^0x[0-9a-f]{130}$/.test(signature)) return false;
  const v = signature.slice(130);
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  return (v === '1b' || v === '1c') && s > 0n && (method === 'permit2' || s <= HALF_N);
}

async function recovers(digest: Hex, signature: Hex, payer: Hex): Promise<boolean> {
  try {
    return isAddressEqual(await recoverAddress({ hash: digest, signature }), payer);
  } catch {
    return false;
  }
}

/** The EIP-712 message the payer signed, exactly as the x402 exact scheme verifies and the token checks it. */
function typedDataOf(m: MatchedPayment) {
  const { chainId } = m.identity;
  if (m.identity.method === 'eip3009') {
    const { authorization: a } = eip3009Payload.parse(m.payload.payload);
    const extra = (m.requirements.extra ?? {}) as { name?: string; version?: string };
    return {
      domain: { name: extra.name, version: extra.version, chainId, verifyingContract: m.requirements.asset as Hex },
      types: authorizationTypes,
      primaryType: 'TransferWithAuthorization' as const,
      message: {
        from: a.from as Hex,
        to: a.to as Hex,
        value: BigInt(a.value),
        validAfter: BigInt(a.validAfter),
        validBefore: BigInt(a.validBefore),
        nonce: a.nonce as Hex,
      },
    };
  }
  const { permit2Authorization: p } = permit2Payload.parse(m.payload.payload);
  return {
    domain: { name: 'Permit2', chainId, verifyingContract: PERMIT2_ADDRESS as Hex },
    types: permit2WitnessTypes,
    primaryType: 'PermitWitnessTransferFrom' as const,
    message: {
      permitted: { token: p.permitted.token as Hex, amount: BigInt(p.permitted.amount) },
      spender: p.spender as Hex,
      nonce: BigInt(p.nonce),
      deadline: BigInt(p.deadline),
      witness: { to: p.witness.to as Hex, validAfter: BigInt(p.witness.validAfter) },
    },
  };
}
