import type { SettleResponse } from '@x402/core/types';
import type { Kysely } from 'kysely';
import type { Config } from '../../config/schema.ts';
import type { SiwxResult } from '../../siwe/siwx.ts';
import type { Database } from '../../storage/schema.ts';
import type { PaymentRow } from '../payment-store.ts';
import type { TopupService } from '../service.ts';
import type { SettleMatchedDeps } from '../settle-matched.ts';

/**
 * Everything the paid-request workflow uses of the running gateway and of the one request it
 * decides, and nothing more: it never sees Fastify or the Services container. The web edge builds
 * it per request (src/http/x402/paid-request-port.ts); what touches the connection (the receipt
 * header, the rate-limit headers, cutting the client) is a method here, so the workflow states
 * when it happens and the edge says how.
 */
export interface PaidRequestDeps {
  readonly db: Kysely<Database>;
  /** The x402 service (top-ups are on whenever pay-per-request is). */
  readonly topup: TopupService;
  /** The one settle path of every paid endpoint (payments/settle-matched.ts). */
  readonly settle: SettleMatchedDeps;
  readonly config: Pick<Config, 'payPerRequest' | 'topup'> & {
    readonly chat: Pick<Config['chat'], 'drainTimeoutSeconds' | 'firstByteTimeoutSeconds'>;
    readonly server: Pick<Config['server'], 'publicUrl'>;
  };
  now(): number;
  /** The request's logger. */
  readonly log: SettleMatchedDeps['logger'];
  /** The request's id (it holds a payment identifier's claim) and its parsed body (its digest binds the identifier). */
  readonly requestId: string;
  readonly body: unknown;
  /** Counts one request of `wallet` against its chat window; throws the 429 over the limit. */
  countRequest(wallet: string): Promise<void>;
  /** Whether this gateway offers sign-in-with-x at all (its configuration lets a challenge pass the verifier). */
  readonly siwxOffered: boolean;
  /** Verifies a `sign-in-with-x` header sent to `path`; a refused proof counts against the client's address (throws its 429). */
  verifySiwx(header: string, path: string): Promise<SiwxResult>;
  /** The route's x402 `bazaar` entry, forwarded with an exact payment to the facilitator's discovery. */
  bazaar(path: string): unknown;
  /** Sends the credited payment's receipt with the answer (set before the first byte), or takes it back (null). */
  showReceipt(payment: PaymentRow | null): void;
  /**
   * Sends an x402 batch-settlement receipt (PAYMENT-RESPONSE) with the answer, or takes it back
   * (null). Called again once a JSON answer's charge is known; a stream's headers are out by then
   * and keep the first one.
   */
  showChannelReceipt(receipt: SettleResponse | null): void;
  /** TEST ONLY (src/fail-points.ts): a channel request stops for good after its answer, before its commit. */
  stopsBeforeChannelCommit?(): boolean;
  /** Cuts the client's connection: an upto request whose deadline leaves only the time to settle it. */
  cutClient(): void;
}
