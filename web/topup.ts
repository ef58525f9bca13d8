import { x402Client } from '@x402/core/client';
import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired, PaymentRequirements } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { encodeFunctionData, getTypesForEIP712Domain, maxUint256, parseUnits, serializeTypedData, type Hex, type TypedDataDomain } from 'viem';
import { failure, request, type Offer } from './api.ts';
import { waitForReceipt, type Eip1193 } from './wallet.ts';

/** Uniswap's Permit2, at the same address on every chain. */
export const PERMIT2 = '0x000000000022D473030F116dDEE9F6B43aC78BA3';

export type TopupState =
  | { phase: 'approving'; transaction?: string }
  | { phase: 'signing' }
  | { phase: 'settling' }
  | { phase: 'pending'; transaction: string | null }
  | { phase: 'credited'; transaction: string; creditedUsdc: number; balanceUsdc: number };

/** The outcome a caller branches on; `retry` resends the same signed payment (never a second one). */
export type TopupResult =
  | { kind: 'credited'; transaction: string; creditedUsdc: number; balanceUsdc: number }
  | { kind: 'pending'; transaction: string | null }
  | { kind: 'rejected'; reason: string }
  | { kind: 'unavailable'; message: string; retry: () => Promise<TopupResult> };

const ERC20 = [
  { type: 'function', name: 'allowance', stateMutability: 'view', inputs: [{ type: 'address' }, { type: 'address' }], outputs: [{ type: 'uint256' }] },
  { type: 'function', name: 'approve', stateMutability: 'nonpayable', inputs: [{ type: 'address' }, { type: 'uint256' }], outputs: [{ type: 'bool' }] },
] as const;

/**
 * One top-up through the wallet: ask the gateway for its offer at this amount, check that it asks
 * for exactly what the person typed, give Permit2 an allowance first when a Permit2 token needs one
 * (one transaction), sign the payment (EIP-3009 or Permit2, typed data the wallet shows), and send
 * it. The signed payment is kept, so "try again" after a 503 resends the same authorization: the
 * gateway credits one authorization at most once.
 */
export async function topUp(provider: Eip1193, payer: Hex, usd: number, offer: Offer, onState: (s: TopupState) => void): Promise<TopupResult> {
  const answer = await request<Record<string, unknown>>('POST', '/v1/topup', { body: { amount: usd } });
  // The offer is read from PAYMENT-REQUIRED, always x402 v2: the body is v1 when the operator set
  // topup.x402v1Body (for x402 v1 clients), and lists neither Permit2 nor CAIP-2 networks then.
  const encoded = answer.headers.get('payment-required');
  if (answer.status !== 402 || !encoded) throw failure(answer.status, answer.body);
  const asked = { body: decodePaymentRequiredHeader(encoded) as PaymentRequired };
  const requirement = asked.body.accepts.find((r) => r.network === offer.network && r.asset.toLowerCase() === offer.asset.toLowerCase());
  if (!requirement) throw new Error(`The gateway no longer offers ${offer.name}; reload the page.`);
  const expected = parseUnits(String(usd), offer.decimals).toString();
  if (requirement.amount !== expected)
    throw new Error(`The gateway asks for ${requirement.amount} units for $${usd} (expected ${expected}); refusing to sign.`);

  if (offer.transfer_method === 'permit2') await ensurePermit2Allowance(provider, payer, requirement, onState);

  onState({ phase: 'signing' });
  const client = new x402Client(() => requirement);
  registerExactEvmScheme(client, {
    signer: {
      address: payer,
      signTypedData: (typed) => provider.request({ method: 'eth_signTypedData_v4', params: [payer, typedDataJson(typed)] }) as Promise<Hex>,
    },
  });
  // Exactly the amount typed, of the one asset picked: the client refuses anything else.
  client.setSpendControls({
    maxAmountPerPayment: `$${usd}`,
    allowedAssets: [{ network: requirement.network, asset: requirement.asset, maxAmountPerPayment: requirement.amount }],
  });
  const payload = await client.createPaymentPayload({ ...asked.body, accepts: [requirement] });
  const header = encodePaymentSignatureHeader(payload);
  const send = async (): Promise<TopupResult> => {
    onState({ phase: 'settling' });
    const res = await request<Record<string, unknown>>('POST', '/v1/topup', { body: { amount: usd }, headers: { 'payment-signature': header } });
    const b = res.body;
    if (res.status === 200) {
      const done = { transaction: String(b.transaction), creditedUsdc: Number(b.credited_usdc), balanceUsdc: Number(b.balance_usdc) };
      onState({ phase: 'credited', ...done });
      return { kind: 'credited', ...done };
    }
    if (res.status === 202) {
      const transaction = typeof b.transaction === 'string' ? b.transaction : null;
      onState({ phase: 'pending', transaction });
      return { kind: 'pending', transaction };
    }
    if (res.status === 402) return { kind: 'rejected', reason: String(b.reason ?? b.message ?? 'the payment was rejected') };
    if (res.status === 503 || res.status === 0) return { kind: 'unavailable', message: String(b.message ?? ''), retry: send };
    throw failure(res.status, b);
  };
  return send();
}

/** eth_signTypedData_v4's JSON: the wallet needs the EIP712Domain type spelled out (viem's wallet client adds it too). */
function typedDataJson(typed: {
  domain: Record<string, unknown>;
  types: Record<string, unknown>;
  primaryType: string;
  message: Record<string, unknown>;
}): string {
  const types = { EIP712Domain: getTypesForEIP712Domain({ domain: typed.domain as TypedDataDomain }), ...typed.types };
  return serializeTypedData({ ...typed, types } as never);
}

async function ensurePermit2Allowance(provider: Eip1193, payer: Hex, r: PaymentRequirements, onState: (s: TopupState) => void): Promise<void> {
  const data = encodeFunctionData({ abi: ERC20, functionName: 'allowance', args: [payer, PERMIT2] });
  const allowance = BigInt((await provider.request({ method: 'eth_call', params: [{ to: r.asset, data }, 'latest'] })) as string);
  if (allowance >= BigInt(r.amount)) return;
  onState({ phase: 'approving' });
  const approve = encodeFunctionData({ abi: ERC20, functionName: 'approve', args: [PERMIT2, maxUint256] });
  const hash = (await provider.request({ method: 'eth_sendTransaction', params: [{ from: payer, to: r.asset, data: approve }] })) as string;
  onState({ phase: 'approving', transaction: hash });
  const receipt = await waitForReceipt(provider, hash);
  if (receipt.status !== '0x1') throw new Error('The Permit2 approval transaction failed on chain; nothing was paid.');
}

/** Words for a rejected payment: the facilitator's reason codes, in plain language. */
export function rejectionText(reason: string, tokenName: string): string {
  if (/insufficient|exceeds balance|balance/i.test(reason)) return `Your wallet does not hold enough ${tokenName} for this top-up. Nothing was credited.`;
  if (/expired|valid/i.test(reason)) return 'The signed payment expired before it settled. Nothing was credited; top up again.';
  if (/allowance/i.test(reason)) return `Permit2 may not spend your ${tokenName} yet. Approve it, then top up again.`;
  return `The payment was refused (${reason}). Nothing was credited.`;
}
