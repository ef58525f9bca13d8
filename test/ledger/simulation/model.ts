import { bucketOf, bucketsAt, type SpendPeriod } from '../../../src/ledger/spend-periods.ts';

/**
 * The reference model of the ledger simulation (../simulation.test.ts): what the books must say
 * after each step, computed with plain numbers from the rules the operations state (reservations.ts,
 * finish.ts, late-charge.ts, expire.ts), never from the database.
 */

export const LEASE_MS = 60_000;

export interface WalletModel {
  balance: number;
  locked: number;
}

export interface KeyModel {
  /** Index into LedgerModel.wallets. */
  wallet: number;
  limit: number | null;
  period: SpendPeriod | null;
}

export interface ReservationModel {
  requestId: string;
  key: number;
  amount: number;
  createdAt: number;
  leaseExpiresAt: number;
  status: 'pending' | 'settled' | 'voided';
  charged: number;
  /** A usage row exists: a finish wrote it (a settle or a void), or a late charge did. The sweeper writes none. */
  billed: boolean;
  /** On the hold wallet: the upto payment holding when it was reserved (the reserve records it), else null. */
  uptoPaymentId: string | null;
}

export interface UptoModel {
  paymentId: string;
  max: number;
  state: 'holding' | 'settling';
  /** Fixed by fixCharge: what the payment settles. */
  charge: number;
}

export interface LedgerModel {
  now: number;
  wallets: WalletModel[];
  keys: KeyModel[];
  /** Per `${key}|${bucket}`: a key's spend and locked amount in one period bucket. */
  spend: Map<string, { spent: number; locked: number }>;
  reservations: ReservationModel[];
  /** The payer's open upto payment, if any (one at a time); its hold wallet is the last wallet. */
  upto: UptoModel | null;
  payments: number;
}

const bucketRow = (m: LedgerModel, key: number, bucket: string) => {
  const id = `${key}|${bucket}`;
  let row = m.spend.get(id);
  if (!row) m.spend.set(id, (row = { spent: 0, locked: 0 }));
  return row;
};

/** Moves a key's three buckets (total, day, month) of the period holding `at`, as every writer of key_spend does. */
function moveBuckets(m: LedgerModel, key: number, at: number, spent: number, locked: number): void {
  for (const bucket of bucketsAt(at)) {
    const row = bucketRow(m, key, bucket);
    row.spent += spent;
    row.locked += locked;
  }
}

/** What a key's limit still admits in the period holding `at` (never negative); Infinity without a limit. */
export function roomLeft(m: LedgerModel, key: number, at: number): number {
  const k = m.keys[key]!;
  if (k.limit === null) return Infinity;
  const row = m.spend.get(`${key}|${bucketOf(k.period ?? 'total', at)}`) ?? { spent: 0, locked: 0 };
  return Math.max(0, k.limit - row.spent - row.locked);
}

export type ReserveExpectation = { ok: true; keyLimited: boolean } | { ok: false; refused: 'balance' | 'key_limit' };

export function reserve(m: LedgerModel, key: number, requestId: string, amount: number): ReserveExpectation {
  const w = m.wallets[m.keys[key]!.wallet]!;
  if (w.balance - w.locked < amount) return { ok: false, refused: 'balance' };
  if (amount > roomLeft(m, key, m.now)) return { ok: false, refused: 'key_limit' };
  w.locked += amount;
  moveBuckets(m, key, m.now, 0, amount);
  const onHold = m.keys[key]!.wallet === m.wallets.length - 1 && m.upto?.state === 'holding';
  m.reservations.push({
    requestId,
    key,
    amount,
    createdAt: m.now,
    leaseExpiresAt: m.now + LEASE_MS,
    status: 'pending',
    charged: 0,
    billed: false,
    uptoPaymentId: onHold ? m.upto!.paymentId : null,
  });
  return { ok: true, keyLimited: m.keys[key]!.limit !== null };
}

/** A settle (or, asked 0, a void): the charge is what the wallet holds once this lock is released, others' locks kept. */
export function finish(m: LedgerModel, r: ReservationModel, asked: number): { applied: boolean; charged: number } {
  if (r.status !== 'pending') return { applied: false, charged: 0 };
  const w = m.wallets[m.keys[r.key]!.wallet]!;
  const charged = Math.max(0, Math.min(asked, w.balance - (w.locked - r.amount)));
  w.locked -= r.amount;
  w.balance -= charged;
  moveBuckets(m, r.key, r.createdAt, charged, -r.amount);
  Object.assign(r, { status: charged > 0 ? 'settled' : 'voided', charged, billed: true });
  return { applied: true, charged };
}

/** The sweeper: every pending reservation whose lease ran out is voided, with no usage row. */
export function sweep(m: LedgerModel): number {
  let swept = 0;
  for (const r of m.reservations) {
    if (r.status !== 'pending' || r.leaseExpiresAt >= m.now) continue;
    const w = m.wallets[m.keys[r.key]!.wallet]!;
    w.locked -= r.amount;
    moveBuckets(m, r.key, r.createdAt, 0, -r.amount);
    r.status = 'voided';
    swept++;
  }
  return swept;
}

/** A produced answer billed after the sweeper released it: out of the free balance and the key's room in its period. */
export function lateCharge(m: LedgerModel, r: ReservationModel, asked: number): { kind: 'late'; charged: number } | { kind: 'already_billed' } {
  if (r.billed) return { kind: 'already_billed' };
  const wallet = m.keys[r.key]!.wallet;
  const w = m.wallets[wallet]!;
  // On the hold wallet the money is there for this request only while the payment it reserved on
  // still holds: after that the wallet holds a later payment's maximum (late-charge.ts, holdsForIt).
  const isHold = wallet === m.wallets.length - 1;
  const holdsForIt = !isHold || (r.uptoPaymentId !== null && m.upto?.paymentId === r.uptoPaymentId && m.upto.state === 'holding');
  const free = holdsForIt ? w.balance - w.locked : 0;
  const charged = Math.max(0, Math.min(asked, free, roomLeft(m, r.key, r.createdAt)));
  w.balance -= charged;
  moveBuckets(m, r.key, r.createdAt, charged, 0);
  Object.assign(r, { status: charged > 0 ? 'settled' : 'voided', charged, billed: true });
  return { kind: 'late', charged };
}

/** A movement of an adjustment: refused (nothing moves) when it would take the balance below what is locked. */
export function adjust(m: LedgerModel, wallet: number, amount: number): boolean {
  const w = m.wallets[wallet]!;
  if (w.balance + amount < w.locked) return false;
  w.balance += amount;
  return true;
}

/** The upto payer's hold wallet: the last one. */
export const holdWallet = (m: LedgerModel): WalletModel => m.wallets[m.wallets.length - 1]!;

/** fixCharge: `running` while the hold wallet has a request in flight; otherwise the charge is what the hold lost, and the rest is released. */
export function fixCharge(m: LedgerModel): { outcome: 'fixed' | 'running' | 'not-holding'; charge: number } {
  if (m.upto?.state !== 'holding') return { outcome: 'not-holding', charge: 0 };
  const hold = holdWallet(m);
  if (hold.locked > 0) return { outcome: 'running', charge: 0 };
  const charge = m.upto.max - hold.balance;
  hold.balance = 0;
  Object.assign(m.upto, { state: 'settling', charge });
  return { outcome: 'fixed', charge };
}
