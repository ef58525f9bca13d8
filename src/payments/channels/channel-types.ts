/**
 * The x402 `batch-settlement` (EVM) shapes the request path reads and writes
 * (the x402 repository's EVM batch-settlement scheme spec). Amounts the gateway holds are
 * numbers of micro-USDC, which are the token's own units (only 6-decimal assets are offered).
 */

/** The immutable config a channel id is the EIP-712 hash of. */
export interface ChannelConfig {
  payer: `0x${string}`;
  payerAuthorizer: `0x${string}`;
  receiver: `0x${string}`;
  receiverAuthorizer: `0x${string}`;
  token: `0x${string}`;
  withdrawDelay: number;
  salt: `0x${string}`;
}

/** The on-chain fields of a channel, as the facilitator reports them (its verify `extra`, its settle `extra.channelState`). */
export interface ChannelSnapshot {
  channelId: `0x${string}`;
  balance: number;
  totalClaimed: number;
  withdrawRequestedAt: number;
  refundNonce: string;
}

/** The spec's error codes the request path answers with (PaymentRequired.error). */
export const CHANNEL_ERRORS = {
  cumulativeMismatch: 'invalid_batch_settlement_evm_cumulative_amount_mismatch',
  busy: 'invalid_batch_settlement_evm_channel_busy',
  channelIdMismatch: 'invalid_batch_settlement_evm_channel_id_mismatch',
  authorizerMismatch: 'invalid_batch_settlement_evm_authorizer_address_mismatch',
  belowMinDeposit: 'invalid_batch_settlement_evm_deposit_below_min_deposit',
  notFound: 'invalid_batch_settlement_evm_channel_not_found',
  voucherSignature: 'invalid_batch_settlement_evm_voucher_signature',
  /** The gateway's own: the spec has no code for a channel under a timed withdrawal. */
  withdrawing: 'invalid_batch_settlement_evm_channel_withdrawing',
  /** The gateway's own: the spec has no code for a refund payload sent again. */
  refundReplayed: 'invalid_batch_settlement_evm_refund_replayed',
} as const;

export type ChannelErrorCode = (typeof CHANNEL_ERRORS)[keyof typeof CHANNEL_ERRORS];
