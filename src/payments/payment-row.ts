import type { Selectable } from 'kysely';
import type { PaymentTable } from '../storage/schema.ts';

/**
 * One recorded payment as read from the payments table. Its own file so that payment-terms.ts (what
 * makes two submissions the same payment) and payment-store.ts (which records them) both read it
 * without importing each other.
 */
export type PaymentRow = Selectable<PaymentTable>;
