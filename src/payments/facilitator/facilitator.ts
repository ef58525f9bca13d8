import type { PaymentPayload, PaymentRequirements, SettleResponse, VerifyResponse } from '@x402/core/types';

/**
 * What Tollgate needs from an x402 facilitator. `local` runs @x402/core's facilitator with
 * @x402/evm's exact scheme in-process; `remote` calls any facilitator's HTTP API.
 *
 * Errors: a facilitator that cannot be reached throws FacilitatorUnavailable (the route answers
 * 503). One that answered but whose settle outcome is unknown (a timeout after sending) throws
 * SettlementUnknown (the route answers 202 and the reconciler finishes the payment).
 */
export interface Facilitator {
  readonly kind: 'local' | 'remote';
  verify(payload: PaymentPayload, requirements: PaymentRequirements): Promise<VerifyResponse>;
  /** `onBroadcast` is called with the settlement transaction hash as soon as it is sent, if known. */
  settle(payload: PaymentPayload, requirements: PaymentRequirements, onBroadcast?: (txHash: string) => Promise<void>): Promise<SettleResponse>;
  supported(): Promise<{ kinds: Array<{ x402Version: number; scheme: string; network: string }> }>;
  /**
   * Local only (it holds the relayer key): sends again, at a higher fee, a settlement the node holds
   * unmined; the replacement's hash, or null when there was nothing to replace. See fee-bump.ts.
   */
  replaceStuck?(network: string, txHash: string): Promise<string | null>;
}

export class FacilitatorUnavailable extends Error {
  override name = 'FacilitatorUnavailable';
}

export class SettlementUnknown extends Error {
  override name = 'SettlementUnknown';
}
