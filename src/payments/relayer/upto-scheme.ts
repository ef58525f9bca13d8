import type { x402Facilitator } from '@x402/core/facilitator';
import type { Network } from '@x402/core/types';
import type { FacilitatorEvmSigner } from '@x402/evm';
import { UptoEvmScheme } from '@x402/evm/upto/facilitator';
import { remembersNothing } from './exact-scheme.ts';

/**
 * @x402/evm's upto scheme on `network` (v2 only: upto has no v1 form). The payer signs a Permit2
 * witness transfer of at most `amount` that only this relayer may send (the witness's
 * `facilitator`); settle sends the amount the requirements name, which may be anything up to the
 * signed maximum, and 0 sends nothing. Like the exact scheme it keeps no memory of pending
 * settlements: Tollgate records the transaction itself (exact-scheme.ts says why).
 */
export function registerUptoScheme(facilitator: x402Facilitator, signer: FacilitatorEvmSigner, network: string): void {
  facilitator.register(network as Network, new UptoEvmScheme(signer, { pendingSettlementStore: remembersNothing }));
}
