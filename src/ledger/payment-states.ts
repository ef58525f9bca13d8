import type { PaymentState, PaymentStatus, UptoState } from '../storage/schema.ts';

/**
 * A payment's life, written once as a table: its states, the transitions between them, who triggers each and
 * what each does to the ledger. One machine for every kind of payment: a top-up and an exact
 * pay-per-request payment end `credited`; an `upto` payment leaves `pending` for `holding` and
 * lives on in the upto states. docs/DECISIONS.md draws it. The table lives
 * with the ledger because it says what the ledger holds in each state: `ledger-check` reads it, and
 * the ledger imports nothing from payments/.
 *
 * `state` is the truth. `status` and `upto_state` (migrations 002 and 013) are kept as projections
 * of it, written only by src/payments/states.ts (the one guarded transition), because readers,
 * the partial index of one open upto payment per payer and the status check constraint use them, and SQLite cannot drop or alter those without rebuilding
 * the table. `failure_reason` is only the human text: which payments count as released is the
 * state, never a message's wording.
 */

/** What the ledger holds for a payment in a state: `ledger-check` holds every payment to it. */
export type CreditHeld = 'none' | 'payer' | 'hold';

export interface StateFacts {
  status: PaymentStatus;
  upto: UptoState | null;
  /** Its credit (reference payment:<id>): none, one `topup` to the payer, or one `upto_hold` to the payer's hold wallet. */
  credit: CreditHeld;
  /** The unspent rest of an upto maximum has left the hold wallet (an `upto_release`, reference payment:<id>). */
  holdReleased: boolean;
}

export const PAYMENT_STATES = {
  /** Recorded before anything is sent; the request that recorded or reclaimed it owns the attempt. */
  pending: { status: 'pending', upto: null, credit: 'none', holdReleased: false },
  /** Our settlement transaction is on its way (tx_hash). */
  submitted: { status: 'submitted', upto: null, credit: 'none', holdReleased: false },
  /** Settled on chain and credited to the payer: final. */
  credited: { status: 'credited', upto: null, credit: 'payer', holdReleased: false },
  /** It did not and will not settle as sent, for a reason of the payer's; the same payment may claim it again unless the chain used its authorization. */
  failed: { status: 'failed', upto: null, credit: 'none', holdReleased: false },
  /** Let go by the gateway with nothing settled, for a reason of its own (release_kind); watched on chain a while. */
  released: { status: 'failed', upto: null, credit: 'none', holdReleased: false },
  /** An upto maximum is held in the payer's hold wallet while its request runs. */
  holding: { status: 'credited', upto: 'holding', credit: 'hold', holdReleased: false },
  /** The charge is fixed (settle_amount_atomic) and its settlement is being sent. */
  settling: { status: 'credited', upto: 'settling', credit: 'hold', holdReleased: true },
  /** The charge arrived on chain: final. */
  settled: { status: 'credited', upto: 'settled', credit: 'hold', holdReleased: true },
  /** The settle failed after the answer was delivered: the payer owes the charge. */
  unsettled: { status: 'credited', upto: 'unsettled', credit: 'hold', holdReleased: true },
  /** The operator recorded the charge as lost. */
  written_off: { status: 'credited', upto: 'written_off', credit: 'hold', holdReleased: true },
} as const satisfies Record<PaymentState, StateFacts>;

export type Trigger = 'request' | 'reconciler' | 'operator';

export interface TransitionRule {
  from: readonly PaymentState[];
  to: PaymentState;
  by: readonly Trigger[];
  ledger: string;
  /**
   * Only while the chain has not used the payment's authorization (no `onchain_amount_atomic`
   * recorded): a used authorization can never settle again, so reopening it would only lose the
   * reason that names the amount the chain moved.
   */
  onlyIfUnusedOnChain?: true;
}

/** Every move a payment may make. A move not listed here is refused by `transition`, before any SQL. */
export const TRANSITIONS = {
  reopen: { from: ['failed', 'released'], to: 'pending', by: ['request'], ledger: 'none', onlyIfUnusedOnChain: true },
  submit: { from: ['pending', 'submitted', 'failed', 'released'], to: 'submitted', by: ['request', 'reconciler'], ledger: 'none' },
  credit: {
    from: ['pending', 'submitted', 'failed', 'released'],
    to: 'credited',
    by: ['request', 'reconciler'],
    ledger: "one `topup` credit of the chain's amount to the payer, reference payment:<id>",
  },
  fail: { from: ['pending', 'submitted'], to: 'failed', by: ['request', 'reconciler'], ledger: 'none' },
  refuseAmount: {
    from: ['pending', 'submitted', 'failed', 'released'],
    to: 'failed',
    by: ['request', 'reconciler'],
    ledger: 'none (the chain moved another amount)',
  },
  release: { from: ['pending', 'submitted'], to: 'released', by: ['request', 'reconciler'], ledger: 'none' },
  hold: { from: ['pending'], to: 'holding', by: ['request'], ledger: 'one `upto_hold` of the signed maximum to the hold wallet, reference payment:<id>' },
  fixCharge: {
    from: ['holding'],
    to: 'settling',
    by: ['request', 'reconciler'],
    ledger: 'one `upto_release` of the unspent rest from the hold wallet (0 when all was spent), reference payment:<id>',
  },
  settle: { from: ['settling', 'unsettled'], to: 'settled', by: ['request', 'reconciler'], ledger: 'none (the charge was taken when the request finished)' },
  unsettle: { from: ['settling'], to: 'unsettled', by: ['request', 'reconciler'], ledger: 'none' },
  retry: { from: ['unsettled', 'written_off'], to: 'settling', by: ['reconciler', 'operator'], ledger: 'none' },
  writeOff: { from: ['unsettled'], to: 'written_off', by: ['operator'], ledger: 'none (the charge stays; the loss is on chain)' },
  settleWrittenOff: { from: ['written_off'], to: 'settled', by: ['operator'], ledger: 'none' },
} as const satisfies Record<string, TransitionRule>;

/** The state every payment is recorded in. */
export const INITIAL_STATE = 'pending' satisfies PaymentState;

/** True when a move to `to` is guarded on the authorization being unused on chain. */
export const needsUnusedAuthorization = (to: PaymentState) =>
  Object.values(TRANSITIONS).some((t: TransitionRule) => t.to === to && t.onlyIfUnusedOnChain === true);

export const isAllowed = (from: PaymentState, to: PaymentState) =>
  Object.values(TRANSITIONS).some((t) => t.to === to && (t.from as readonly PaymentState[]).includes(from));
