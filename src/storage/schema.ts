import type { Generated } from 'kysely';

/**
 * Table types for Kysely. Times are epoch milliseconds and money is integer micro-USDC, both
 * stored as 64-bit integers and read back as JS numbers (all values stay far below 2^53).
 */
export interface WalletTable {
  address: string;
  balance_usdc: number;
  locked_usdc: number;
  created_at: number;
  updated_at: number;
}

/** `channel_hold` / `channel_release`: a batch-settlement request's ceiling held on its channel's hold wallet, and its unspent rest (ledger/operations/channel-hold.ts). */
/** `upto_hold` / `upto_release`: an x402 upto payment's maximum held for its request, and its unspent rest (ledger/operations/upto-hold.ts). */
export type LedgerKind = 'topup' | 'redeem' | 'referral_share' | 'adjustment' | 'charge' | 'upto_hold' | 'upto_release' | 'channel_hold' | 'channel_release';

export interface LedgerEntryTable {
  id: Generated<number>;
  wallet: string;
  kind: LedgerKind;
  /** Signed: credits are positive, charges negative. */
  amount_usdc: number;
  /** What caused it: a request id, a payment id, a redeem code id. */
  reference: string | null;
  note: string | null;
  created_at: number;
}

export type ReservationStatus = 'pending' | 'settled' | 'voided';

export interface ReservationTable {
  id: Generated<number>;
  wallet: string;
  api_key_id: number | null;
  request_id: string;
  amount_usdc: number;
  status: ReservationStatus;
  charged_usdc: number | null;
  lease_expires_at: number;
  created_at: number;
  finished_at: number | null;
  /** On a hold wallet `<payer>#upto`: the upto payment holding when it was reserved (migration 017). */
  upto_payment_id: Generated<string | null>;
}

export interface ApiKeyTable {
  id: Generated<number>;
  wallet: string;
  key_hash: string;
  prefix: string;
  last4: string;
  label: string;
  created_at: number;
  revoked_at: number | null;
  last_used_at: number | null;
  /** Migration 006: the most this key may spend per `spend_limit_period`; NULL is no limit. */
  spend_limit_usdc: number | null;
  spend_limit_period: 'total' | 'day' | 'month' | null;
  /** JSON array of full model ids the key may use; NULL is every model. */
  allowed_models: string | null;
  expires_at: number | null;
}

/**
 * A key's running spend in one period bucket (`total`, `day:YYYY-MM-DD`, `month:YYYY-MM`, by
 * reservation time): `locked` is its pending reservations, `spent` its charges. Kept in the same
 * unit as the wallet's reserve and finish; checkLedger compares it with the usage rows.
 */
export interface KeySpendTable {
  api_key_id: number;
  period: string;
  spent_usdc: number;
  locked_usdc: number;
}

export interface SiweNonceTable {
  address: string;
  nonce: string;
  expires_at: number;
}

/** x402 payment-identifier idempotency keys (migration 011). */
export interface PaymentIdentifierTable {
  payer: string;
  id: string;
  body_digest: string;
  payment_digest: string;
  /** Set when the request started running; null while its payment is being settled. */
  request_id: string | null;
  created_at: number;
  /** Migration 012: the request holding the claim (its request id), the only one that may free it. */
  holder: string | null;
}

export interface RedeemCodeTable {
  id: Generated<number>;
  code_hash: string;
  value_usdc: number;
  created_at: number;
  redeemed_by: string | null;
  redeemed_at: number | null;
}

export interface ReferralCodeTable {
  code: string;
  wallet: string;
  created_at: number;
}

export interface ReferralAttributionTable {
  wallet: string;
  referrer: string;
  code: string;
  created_at: number;
}

export interface RequestUsageTable {
  id: Generated<number>;
  request_id: string;
  api_key_id: number;
  wallet: string;
  model: string;
  provider: string;
  /** The deployment that served (migration 010); null before it, and when none served. */
  deployment: string | null;
  prompt_tokens: number;
  completion_tokens: number;
  reasoning_tokens: number;
  cached_tokens: number;
  charged_usdc: number;
  provider_cost_usdc: number;
  status: string;
  latency_ms: number;
  estimated: number;
  created_at: number;
}

/**
 * A produced answer charged late (its settle was spooled while the database was down, and the
 * sweeper released its reservation meanwhile) for less than its price, because the wallet's free
 * balance no longer covered it. Reported by ledger-check; written once per request.
 */
export interface SettleShortfallTable {
  request_id: string;
  wallet: string;
  requested_usdc: number;
  charged_usdc: number;
  created_at: number;
}

/** Running sums of request_usage per API key (request_usage rows are never updated or deleted),
 * kept in the same statement or write unit as the row they add up. */
export interface UsageTotalsTable {
  api_key_id: number;
  request_count: number;
  prompt_tokens: number;
  completion_tokens: number;
  reasoning_tokens: number;
  cached_tokens: number;
  charged_usdc: number;
  provider_cost_usdc: number;
}

/** Running sums of request_usage per wallet, UTC day (days since 1970-01-01) and API key, kept
 * in the same statement or write unit as the row they add up (migration 007). */
export interface UsageDailyTable {
  wallet: string;
  day: number;
  api_key_id: number;
  request_count: number;
  prompt_tokens: number;
  completion_tokens: number;
  charged_usdc: number;
}

/** A dashboard session: a bearer token opened with one SIWE proof, stored only as its keyed hash. */
export interface DashboardSessionTable {
  token_hash: string;
  wallet: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

export type PaymentStatus = 'pending' | 'submitted' | 'credited' | 'failed';

/** Migration 014: a payment's one state (src/payments/states.ts is the machine; status and upto_state are its projections). */
export type PaymentState = 'pending' | 'submitted' | 'credited' | 'failed' | 'released' | 'holding' | 'settling' | 'settled' | 'unsettled' | 'written_off';

/** Migration 014: why the gateway let a payment go with nothing settled (state `released`). */
export type ReleaseKind = 'never_sent' | 'dropped' | 'unavailable' | 'refused_by_node';

/** An x402 top-up. `pending`: recorded, settlement not yet sent (or its outcome unknown); `submitted`:
 * our settlement transaction is known; `credited`: settled on chain and credited; `failed`: it did
 * not settle (a retry of the same authorization may reopen it). */
export interface PaymentTable {
  id: string;
  network: string;
  asset: string;
  payer: string;
  nonce: string;
  transfer_method: 'eip3009' | 'permit2';
  pay_to: string;
  amount_atomic: string;
  amount_usdc: number;
  payload_digest: string;
  /** Unix seconds after which the authorization can no longer be used. */
  valid_before: number;
  /** Chain height when the payment was recorded: where log searches start. */
  from_block: number;
  status: PaymentStatus;
  tx_hash: string | null;
  failure_reason: string | null;
  balance_after_usdc: number | null;
  locked_after_usdc: number | null;
  created_at: number;
  updated_at: number;
  credited_at: number | null;
  /** SHA-256 of the whole signed payload; null on rows recorded before migration 003. */
  terms_digest: string | null;
  /** The offer's token decimals; null only on a legacy row whose two amounts disagree. */
  token_decimals: number | null;
  /** Token units the settling transaction moved from the payer to payTo for this authorization. */
  onchain_amount_atomic: string | null;
  /** What the payment was first taken for; only a `chat` payment may pay for chat when sent again. */
  purpose: PaymentPurpose;
  /** Migration 013: null for exact payments; an x402 `upto` payment's settle after its request. */
  upto_state: UptoState | null;
  /** Migration 013: the token units an upto payment settles (its request's charge), written before the send. */
  settle_amount_atomic: string | null;
  /** Migration 013: an upto payment's signed payload (JSON), to settle it after the request or after a restart. */
  upto_payload: string | null;
  /** Migration 014: the payment's state; written only by src/payments/states.ts. */
  state: PaymentState;
  /** Migration 014: set exactly when state is `released`; failure_reason is only the human text. */
  release_kind: ReleaseKind | null;
  /** Migration 020: SHA-256 of the route and body an exact chat payment was first sent with; the only request it runs. */
  request_digest: string | null;
}

export type UptoState = 'holding' | 'settling' | 'settled' | 'unsettled' | 'written_off';

export type PaymentPurpose = 'topup' | 'chat';

export interface SettingTable {
  key: string;
  value: string;
}

/** Migration 009: a Response kept for `previous_response_id`, `item_reference` and GET/DELETE (src/stored-responses/). */
export interface StoredResponseTable {
  id: string;
  wallet: string;
  api_key_id: number;
  created_at: number;
  expires_at: number;
  /** UTF-8 size of input_json, response_json and the item_json of its items: all it keeps. */
  bytes: number;
  input_json: string;
  response_json: string;
}

/** Migration 009: an output item of a stored response, by its id, with its JSON and that JSON's UTF-8 size. */
export interface StoredResponseItemTable {
  id: string;
  response_id: string;
  output_index: number;
  bytes: number;
  item_json: string;
}

type UsageSums = Pick<UsageTotalsTable, Exclude<keyof UsageTotalsTable, 'api_key_id'>>;

/** Migrations 016 and 019: the ledger proven up to the id boundaries read at `at` (src/ledger/checkpoints/). */
export interface LedgerCheckpointTable {
  at: number;
  /** The first UTC day whose usage_daily cells ledger_checkpoint_days holds. */
  cells_from: number;
  last_entry_id: number;
  last_usage_id: number;
  last_reservation_id: number;
  entries: number;
  credits_usdc: number;
  charges_usdc: number;
  created_at: number;
}

/** Migration 016: the latest checkpoint's ledger sums per wallet and usage sums per key. */
export interface LedgerCheckpointWalletTable {
  wallet: string;
  ledger_usdc: number;
}
export interface LedgerCheckpointUsageTable extends UsageSums {
  api_key_id: number;
}
/** Migration 019: the latest checkpoint's usage_daily cells of its open days (requests and charge per wallet, key and UTC day). */
export interface LedgerCheckpointDayTable {
  wallet: string;
  api_key_id: number;
  day: number;
  request_count: number;
  charged_usdc: number;
}

/** Migration 016: request_usage rows removed by retention, summed per wallet, UTC day and key. */
export interface RetiredUsageTable extends UsageSums {
  wallet: string;
  day: number;
  api_key_id: number;
}

/** Migration 016: the spend of finished reservations removed by retention, per key and reservation day. */
export interface RetiredKeySpendTable {
  api_key_id: number;
  day: number;
  spent_usdc: number;
}

/** Migration 016: the instance running a single-runner job, until `expires_at`. */
export interface JobLeaseTable {
  name: string;
  holder: string;
  expires_at: number;
}

export interface Database {
  wallets: WalletTable;
  ledger_entries: LedgerEntryTable;
  reservations: ReservationTable;
  api_keys: ApiKeyTable;
  siwe_nonces: SiweNonceTable;
  payment_identifiers: PaymentIdentifierTable;
  redeem_codes: RedeemCodeTable;
  referral_codes: ReferralCodeTable;
  referral_attributions: ReferralAttributionTable;
  request_usage: RequestUsageTable;
  usage_totals: UsageTotalsTable;
  key_spend: KeySpendTable;
  usage_daily: UsageDailyTable;
  dashboard_sessions: DashboardSessionTable;
  settle_shortfalls: SettleShortfallTable;
  settings: SettingTable;
  payments: PaymentTable;
  stored_responses: StoredResponseTable;
  stored_response_items: StoredResponseItemTable;
  ledger_checkpoints: LedgerCheckpointTable;
  ledger_checkpoint_wallets: LedgerCheckpointWalletTable;
  ledger_checkpoint_usage: LedgerCheckpointUsageTable;
  ledger_checkpoint_days: LedgerCheckpointDayTable;
  retired_usage: RetiredUsageTable;
  retired_key_spend: RetiredKeySpendTable;
  job_leases: JobLeaseTable;
  channels: ChannelTable;
  channel_transfers: ChannelTransferTable;
  channel_spent_vouchers: ChannelSpentVoucherTable;
}

/** Migration 021: a channel's vouchers that paid for a request and still lie above its charged amount (src/payments/channels/spent-vouchers.ts). */
export interface ChannelSpentVoucherTable {
  channel_id: string;
  max_usdc: number;
}

/** An x402 batch-settlement channel (migration 018; src/payments/channels/channel-store.ts). Amounts in micro-USDC = token units. */
export interface ChannelTable {
  channel_id: string;
  network: string;
  payer: string;
  payer_authorizer: string;
  receiver: string;
  receiver_authorizer: string;
  token: string;
  withdraw_delay: number;
  salt: string;
  charged_usdc: number;
  baseline_usdc: number;
  signed_max_usdc: number | null;
  signature: string | null;
  balance_usdc: number;
  total_claimed_usdc: number;
  withdraw_requested_at: number;
  refund_nonce: string;
  synced_at: number;
  deposited_usdc: Generated<number>;
  refunded_usdc: Generated<number>;
  last_request_at: number | null;
  lease_owner: string | null;
  lease_until: number | null;
  pending_request: string | null;
  pending_max_usdc: number | null;
  pending_signature: string | null;
  pending_hold_usdc: number | null;
  last_refund_signature: string | null;
  created_at: number;
  updated_at: number;
}

/** One on-chain transfer made for a channel (deposit, refund, claim, settle), once per transaction. */
export interface ChannelTransferTable {
  id: Generated<number>;
  channel_id: string;
  kind: 'deposit' | 'refund' | 'claim' | 'settle';
  amount_usdc: number;
  tx_hash: string;
  created_at: number;
}
