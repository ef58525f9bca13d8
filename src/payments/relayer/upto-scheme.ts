import { InMemoryPendingSettlementStore, type x402Facilitator } from '@x402/core/facilitator';
import type { FacilitatorContext, Network, PaymentPayload, PaymentRequirements, SettleResponse } from '@x402/core/types';
import { isUptoPermit2Payload, type FacilitatorEvmSigner } from '@x402/evm';
import { UptoEvmScheme } from '@x402/evm/upto/facilitator';
import type { Hex } from 'viem';
import { oneSettleAtATime } from '../facilitator/one-settle-at-a-time.ts';
import { receiptOf, settleUptoCharge, SETTLEMENT_PENDING } from './upto-charge-settle.ts';

/** The node's answer for a transaction hash: throws viem's TransactionNotFoundError when it has neither mined nor pooled it. */
export type TransactionLookup = (hash: Hex) => Promise<unknown>;

/**
 * @x402/evm's upto scheme on `network` (v2 only: upto has no v1 form), its settle replaced: the
 * payer signs a Permit2 witness transfer of at most `amount` that only this relayer may send (the
 * witness's `facilitator`); settle sends the amount the requirements name, checked against that
 * amount and never the signed maximum (upto-charge-settle.ts), and 0 sends nothing. Verify is the
 * package's: at verify time the requirements name the maximum, and the payer must cover it.
 *
 * Settles come from the gateway's own pay-per-request (settle-upto.ts, which records the hash in
 * the database and lets the reconciler decide from the chain) and, through `tollgate facilitator`,
 * from other resource servers running the stock x402 code. When a receipt is late
 * (`settlement_pending`) that code calls /settle again with the same payload, counting on the
 * facilitator to wait on the transaction it already sent; a second transaction could only revert
 * (gas paid by the relayer). So the transaction is remembered per signature, in this process (one
 * `tollgate facilitator` process, docs/operations.md), and a settle of a remembered authorization
 * waits on it instead of sending. Unless the node no longer knows it (dropped from its pool,
 * restarted): waiting on it then would never end, so it is forgotten and, while the authorization
 * is valid, sent again.
 *
 * Settles of one authorization also run one at a time (one-settle-at-a-time.ts): the memory only
 * holds a transaction once its first receipt wait has timed out, so concurrent settles would each
 * simulate against the chain before the first lands and each send.
 */
class UptoSchemeForCharge extends UptoEvmScheme {
  private readonly queue = oneSettleAtATime<SettleResponse>();
  private readonly pending = new InMemoryPendingSettlementStore();

  constructor(
    private readonly relayer: FacilitatorEvmSigner,
    private readonly lookup: TransactionLookup,
  ) {
    super(relayer);
  }

  override settle(payload: PaymentPayload, requirements: PaymentRequirements, _context?: FacilitatorContext): Promise<SettleResponse> {
    return this.queue(payload, requirements, () => this.settleOnce(payload, requirements));
  }

  private async settleOnce(payload: PaymentPayload, requirements: PaymentRequirements): Promise<SettleResponse> {
    const inner = payload.payload as Record<string, unknown>;
    if (!isUptoPermit2Payload(inner)) {
      return { success: false, errorReason: 'unsupported_payload_type', transaction: '', network: payload.accepted.network, payer: '' };
    }
    const key = inner.signature;
    const remembered = (await this.pending.get(key)) as Hex | undefined;
    const result =
      remembered && (await this.nodeKnows(remembered))
        ? await receiptOf(this.relayer, remembered, payload.accepted.network, inner.permit2Authorization.from, BigInt(requirements.amount))
        : await settleUptoCharge(this.relayer, payload, requirements, inner);
    if (result.errorReason === SETTLEMENT_PENDING && result.transaction) await this.pending.set(key, result.transaction);
    else await this.pending.delete(key);
    return result;
  }

  private async nodeKnows(hash: Hex): Promise<boolean> {
    try {
      await this.lookup(hash);
      return true;
    } catch (err) {
      if ((err as { name?: string }).name === 'TransactionNotFoundError') return false;
      throw err;
    }
  }
}

export function registerUptoScheme(facilitator: x402Facilitator, signer: FacilitatorEvmSigner, network: string, lookup: TransactionLookup): void {
  facilitator.register(network as Network, new UptoSchemeForCharge(signer, lookup));
}
