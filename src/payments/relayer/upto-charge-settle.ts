import { PERMIT2_ADDRESS, x402UptoPermit2ProxyABI, x402UptoPermit2ProxyAddress, type FacilitatorEvmSigner, type UptoPermit2Payload } from '@x402/evm';
import type { PaymentPayload, PaymentRequirements, SettleResponse } from '@x402/core/types';
import { erc20Abi, getAddress, parseAbi, parseErc6492Signature, type Hex } from 'viem';
import { isTransportError } from '../../chain/rpc-errors.ts';

/**
 * Settling an x402 `upto` authorization for the amount the settle-time requirements name (the
 * charge), checked against what the upto Permit2 proxy enforces for that amount and nothing more.
 *
 * @x402/evm's own upto settle verifies the payload again with the signed maximum and simulates a
 * transfer of the maximum before it sends the charge. A payer whose balance or Permit2 allowance
 * fell below the maximum but still covers the charge (a Permit2 approval set to what they mean to
 * spend, spending elsewhere while a stream runs) is then refused, although the proxy
 * (`settle(permit, amount, owner, witness, signature)`: amount ≤ permitted, msg.sender the
 * witness's facilitator, then Permit2's witness transfer of `amount`) and Permit2 (signature,
 * nonce, deadline, then a transferFrom of `amount`) would move the charge. So the charge itself is
 * simulated and sent; a refusal is explained against the charge (balance, allowance, deadline,
 * nonce), in the x402 reason strings the package uses.
 */

const permit2NonceAbi = parseAbi(['function nonceBitmap(address owner, uint256 word) view returns (uint256)']);

/** x402's reason for a settle whose receipt did not come in time: the transaction may still land. */
export const SETTLEMENT_PENDING = 'settlement_pending';

type Refusal = { reason: string; message?: string };

/** The checks that need no chain: the terms the payer signed against the settle's requirements. */
function termsProblem(
  signer: FacilitatorEvmSigner,
  payload: PaymentPayload,
  req: PaymentRequirements,
  p: UptoPermit2Payload,
  nowSeconds: number,
): Refusal | null {
  const a = p.permit2Authorization;
  if (payload.accepted.scheme !== 'upto' || req.scheme !== 'upto') return { reason: 'invalid_upto_evm_scheme' };
  if (payload.accepted.network !== req.network) return { reason: 'invalid_upto_evm_network_mismatch' };
  if (getAddress(a.spender) !== getAddress(x402UptoPermit2ProxyAddress)) return { reason: 'invalid_permit2_spender' };
  if (getAddress(a.witness.to) !== getAddress(req.payTo)) return { reason: 'invalid_permit2_recipient_mismatch' };
  if (getAddress(a.permitted.token) !== getAddress(req.asset)) return { reason: 'permit2_token_mismatch' };
  if (!signer.getAddresses().some((s) => getAddress(s) === getAddress(a.witness.facilitator))) return { reason: 'upto_facilitator_mismatch' };
  if (BigInt(req.amount) > BigInt(a.permitted.amount)) return { reason: 'invalid_upto_evm_payload_settlement_exceeds_amount' };
  if (BigInt(a.deadline) < BigInt(nowSeconds + 6)) return { reason: 'permit2_deadline_expired' };
  if (BigInt(a.witness.validAfter) > BigInt(nowSeconds)) return { reason: 'permit2_not_yet_valid' };
  return null;
}

function settleArgs(p: UptoPermit2Payload, amount: bigint) {
  const a = p.permit2Authorization;
  return [
    { permitted: { token: getAddress(a.permitted.token), amount: BigInt(a.permitted.amount) }, nonce: BigInt(a.nonce), deadline: BigInt(a.deadline) },
    amount,
    getAddress(a.from),
    { to: getAddress(a.witness.to), facilitator: getAddress(a.witness.facilitator), validAfter: BigInt(a.witness.validAfter) },
    parseErc6492Signature(p.signature).signature,
  ] as const;
}

/**
 * Why the proxy would refuse to move `amount` now, read from the chain: the payer's balance and
 * Permit2 allowance against the charge (not the maximum), then the nonce. Transport errors throw
 * (the RPC's failure, not the payer's).
 */
async function explainRefusal(signer: FacilitatorEvmSigner, p: UptoPermit2Payload, amount: bigint): Promise<Refusal> {
  const a = p.permit2Authorization;
  const token = getAddress(a.permitted.token);
  const balance = (await signer.readContract({ address: token, abi: erc20Abi, functionName: 'balanceOf', args: [a.from] })) as bigint;
  if (balance < amount) {
    return { reason: 'permit2_insufficient_balance', message: `the payer holds ${balance} token units, the charge is ${amount}` };
  }
  const allowance = (await signer.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [a.from, PERMIT2_ADDRESS] })) as bigint;
  if (allowance < amount) {
    return { reason: 'permit2_allowance_required', message: `the payer's Permit2 allowance is ${allowance} token units, the charge is ${amount}` };
  }
  const nonce = BigInt(a.nonce);
  const bitmap = { address: PERMIT2_ADDRESS, abi: permit2NonceAbi, functionName: 'nonceBitmap', args: [a.from, nonce >> 8n] } as const;
  const word = (await signer.readContract(bitmap)) as bigint;
  // Used: the chain, not this answer, says whether it paid (the caller reads it).
  if ((word >> (nonce & 0xffn)) & 1n) return { reason: 'permit2_invalid_nonce' };
  return { reason: 'permit2_simulation_failed' };
}

/** The settle's transaction, mined or not: x402's answers for a receipt, a revert, or no receipt in time. */
export async function receiptOf(
  signer: FacilitatorEvmSigner,
  tx: Hex,
  network: PaymentRequirements['network'],
  payer: string,
  amount: bigint,
): Promise<SettleResponse> {
  let status: string;
  try {
    status = (await signer.waitForTransactionReceipt({ hash: tx })).status;
  } catch (err) {
    return { success: false, errorReason: SETTLEMENT_PENDING, errorMessage: (err as Error).message.slice(0, 200), transaction: tx, network, payer };
  }
  if (status !== 'success') return { success: false, errorReason: 'invalid_upto_evm_transaction_failed', transaction: tx, network, payer };
  return { success: true, transaction: tx, network, payer, amount: amount.toString() };
}

/**
 * Settles `req.amount` under the upto authorization `p`: checked, simulated for that amount,
 * sent by the relayer, its receipt awaited (topup.settleWaitSeconds). 0 sends nothing.
 */
export async function settleUptoCharge(
  signer: FacilitatorEvmSigner,
  payload: PaymentPayload,
  req: PaymentRequirements,
  p: UptoPermit2Payload,
): Promise<SettleResponse> {
  const payer = p.permit2Authorization.from;
  const network = payload.accepted.network;
  const refused = (r: Refusal, transaction = ''): SettleResponse => ({
    success: false,
    errorReason: r.reason,
    ...(r.message ? { errorMessage: r.message } : {}),
    transaction,
    network,
    payer,
  });
  const problem = termsProblem(signer, payload, req, p, Math.floor(Date.now() / 1000));
  if (problem) return refused(problem);
  const amount = BigInt(req.amount);
  if (amount === 0n) return { success: true, transaction: '', network, payer, amount: '0' };
  const call = { address: getAddress(x402UptoPermit2ProxyAddress), abi: x402UptoPermit2ProxyABI, functionName: 'settle', args: settleArgs(p, amount) } as const;
  try {
    await signer.readContract(call);
  } catch (err) {
    if (isTransportError(err)) throw err;
    return refused(await explainRefusal(signer, p, amount));
  }
  let tx: Hex;
  try {
    tx = await signer.writeContract(call);
  } catch (err) {
    if (isTransportError(err)) throw err;
    // Not definite: a send the node refused, or a state that changed since the simulation.
    return refused({ reason: 'transaction_failed', message: (err as Error).message.slice(0, 200) });
  }
  return receiptOf(signer, tx, network, payer, amount);
}
