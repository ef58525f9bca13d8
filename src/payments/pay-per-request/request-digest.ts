import { createHash } from 'node:crypto';

/**
 * What an exact pay-per-request payment is bound to: SHA-256 of the route and the request's body as
 * parsed (its JSON text, so the same bytes sent again give the same digest). Recorded with the
 * payment by the request that first sends it; the payment later runs only a request with the same
 * digest (may-run.ts). The authorization and its signature are public once the settle is broadcast
 * (transferWithAuthorization's calldata), the body never is: so a header rebuilt from the chain
 * cannot run an observer's own request on the payer's balance, while the payer's client that sends
 * the same request again (a dropped connection, a 503 while the settle was pending) still can.
 */
export function requestDigest(path: string, body: unknown): string {
  return createHash('sha256')
    .update(path)
    .update('\n')
    .update(JSON.stringify(body) ?? '')
    .digest('hex');
}
