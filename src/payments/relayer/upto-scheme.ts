import { InMemoryPendingSettlementStore, type x402Facilitator } from '@x402/core/facilitator';
import type { FacilitatorContext, Network, PaymentPayload, PaymentRequirements, SettleResponse } from '@x402/core/types';
import type { FacilitatorEvmSigner } from '@x402/evm';
import { UptoEvmScheme } from '@x402/evm/upto/facilitator';
import { oneSettleAtATime } from '../facilitator/one-settle-at-a-time.ts';

/**
 * @x402/evm's upto scheme on `network` (v2 only: upto has no v1 form). The payer signs a Permit2
 * witness transfer of at most `amount` that only this relayer may send (the witness's
 * `facilitator`); settle sends the amount the requirements name, which may be anything up to the
 * signed maximum, and 0 sends nothing.
 *
 * Unlike the exact scheme (exact-scheme.ts), upto keeps the package's memory of settlements still
 * pending. No gateway route settles upto: every upto settle comes from another resource server
 * running the stock x402 code through `tollgate facilitator`, and when the receipt is late
 * (`settlement_pending`) that code calls /settle again with the same payload, counting on the
 * facilitator to wait on the transaction it already sent. Without the memory the retry sends a
 * second transaction that can only revert (gas paid by the relayer), or is told the settle failed
 * while the money arrived. The memory is the package's in-memory store: it is right for one
 * `tollgate facilitator` process, which is how it is run (docs/operations.md); a second process
 * sharing the relayer key would not see the first one's pending transactions.
 *
 * Settles of one authorization also run one at a time (one-settle-at-a-time.ts): the memory only
 * holds a transaction once its first receipt wait has timed out, so concurrent settles would each
 * verify against the chain before the first lands and each send.
 */
class UptoSchemeWithMemory extends UptoEvmScheme {
  private readonly queue = oneSettleAtATime<SettleResponse>();

  constructor(signer: FacilitatorEvmSigner) {
    super(signer, { pendingSettlementStore: new InMemoryPendingSettlementStore() });
  }

  override settle(payload: PaymentPayload, requirements: PaymentRequirements, context?: FacilitatorContext): Promise<SettleResponse> {
    return this.queue(payload, requirements, () => super.settle(payload, requirements, context));
  }
}

export function registerUptoScheme(facilitator: x402Facilitator, signer: FacilitatorEvmSigner, network: string): void {
  facilitator.register(network as Network, new UptoSchemeWithMemory(signer));
}
