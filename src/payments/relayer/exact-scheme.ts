import type { x402Facilitator } from '@x402/core/facilitator';
import type { Network } from '@x402/core/types';
import type { FacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator';
import { NETWORKS } from '@x402/evm/v1';

/**
 * What `registerExactEvmScheme` does (v2 on `network`, v1 on its network names), except that the
 * scheme keeps no memory of settlements still pending. By default it remembers, per signature and
 * in this process only, the transaction it sent, and a second settle of the same payment waits on
 * that transaction instead of sending one. Tollgate keeps that record itself, in the database
 * (payments.tx_hash, watched by the reconciler on every instance), and settles a payment again only
 * once the chain shows its transaction is gone (dropped): waiting on the remembered transaction then
 * would wait for ever, and the payer's retry would never settle.
 */
export const remembersNothing = {
  get: async () => undefined,
  set: async () => {},
  delete: async () => {},
};

export function registerExactScheme(facilitator: x402Facilitator, signer: FacilitatorEvmSigner, network: string, allowedFactories: string[]): void {
  facilitator.register(network as Network, new ExactEvmScheme(signer, { eip6492AllowedFactories: allowedFactories, pendingSettlementStore: remembersNothing }));
  facilitator.registerV1(NETWORKS as Network[], new ExactEvmSchemeV1(signer, { eip6492AllowedFactories: allowedFactories }));
}
