import { HTTPFacilitatorClient } from '@x402/core/http';
import { FacilitatorTimeoutError, SettleError, VerifyError } from '@x402/core/types';
import { FacilitatorUnavailable, SettlementUnknown, type Facilitator } from './facilitator.ts';

/**
 * Any x402 facilitator over HTTP (`/verify`, `/settle`, `/supported`), including another Tollgate's
 * `tollgate facilitator`. The library's default timeout is 90 s; a caller is waiting, so it is short.
 *
 * A facilitator that cannot be reached has done nothing: 503. A settle that timed out or broke
 * mid-way may still have been sent: its outcome is unknown, and the chain decides later.
 */
export function remoteFacilitator(url: string, timeoutMs: number, token?: string): Facilitator {
  const auth = token ? { Authorization: `Bearer ${token}` } : undefined;
  const client = new HTTPFacilitatorClient({
    url,
    timeoutMs,
    createAuthHeaders: auth ? async () => ({ verify: auth, settle: auth, supported: auth }) : undefined,
  });
  const where = new URL(url).origin;
  return {
    kind: 'remote',
    async verify(payload, requirements) {
      try {
        return await client.verify(payload, requirements);
      } catch (err) {
        if (err instanceof VerifyError) return { isValid: false, invalidReason: err.invalidReason, invalidMessage: err.invalidMessage, payer: err.payer };
        throw new FacilitatorUnavailable(`the facilitator at ${where} ${describe(err)}`);
      }
    },
    async settle(payload, requirements) {
      try {
        return await client.settle(payload, requirements);
      } catch (err) {
        if (err instanceof SettleError) {
          return {
            success: false,
            errorReason: err.errorReason,
            errorMessage: err.errorMessage,
            payer: err.payer,
            transaction: err.transaction,
            network: err.network,
          };
        }
        if (neverReached(err)) throw new FacilitatorUnavailable(`the facilitator at ${where} ${describe(err)}`);
        if (sentNothing(err))
          throw new FacilitatorUnavailable(`the facilitator at ${where} could not send the settlement (its relayer or chain); nothing was sent`);
        throw new SettlementUnknown(`the facilitator at ${where} ${describe(err)}; the payment may still settle`);
      }
    },
    async supported() {
      try {
        return await client.getSupported();
      } catch (err) {
        throw new FacilitatorUnavailable(`the facilitator at ${where} ${describe(err)}`);
      }
    },
  };
}

/** The request never left this host: the facilitator cannot have acted on it. */
function neverReached(err: unknown): boolean {
  const code = (err as { cause?: { code?: string } })?.cause?.code;
  return code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'UND_ERR_CONNECT_TIMEOUT';
}

/**
 * `tollgate facilitator` answers 503 FACILITATOR_UNAVAILABLE only when it sent nothing (its RPC is
 * down, or the node refused its relayer's transaction: nonce, fees, gas money). The library reports
 * that answer as a plain Error carrying the status and the body.
 */
function sentNothing(err: unknown): boolean {
  return /^Facilitator settle failed \(503\): .*"FACILITATOR_UNAVAILABLE"/.test((err as Error)?.message ?? '');
}

function describe(err: unknown): string {
  if (err instanceof FacilitatorTimeoutError) return `did not answer within ${err.timeoutMs} ms`;
  const code = (err as { cause?: { code?: string } })?.cause?.code;
  if (code) return `could not be reached (${code})`;
  return 'failed to answer';
}
