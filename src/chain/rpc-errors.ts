import { type BaseError, HttpRequestError, InternalRpcError, LimitExceededRpcError, RpcRequestError, TimeoutError, WebSocketRequestError } from 'viem';
import { someErrorInChain } from '../outage.ts';

/**
 * JSON-RPC codes a node answers when it cannot serve now, rather than refusing the call itself:
 * -32603 internal error (a node behind a load balancer that is down or syncing), -32005 limit
 * exceeded (the provider's rate limit), -32000 a generic server error (geth's "header not found"
 * while a node falls behind).
 */
const UNAVAILABLE_RPC_CODES = new Set([-32603, -32005, -32000]);

/**
 * -32000 is also how geth answers a transaction it refuses (nonce too low, insufficient funds, an
 * underpriced replacement, a revert), and some providers put those under -32603: they are the
 * call's own answer, not an outage, and the payment path reads them (broadcast-refusal.ts); a 503
 * "the RPC is not answering" would mislead.
 */
const CALL_REFUSAL = /nonce|insufficient funds|underpriced|already known|known transaction|revert|fee cap|gas/i;

/**
 * viem's errors for an RPC that is down, refused, too slow, or answered "not now" (possibly
 * wrapped as a cause, anywhere in a chain that may loop). Matched by class, never by name: a
 * DOMException named TimeoutError (AbortSignal.timeout of any other client) is not the RPC's.
 */
export function isTransportError(err: unknown): boolean {
  return someErrorInChain(err, (e) => {
    if (e instanceof HttpRequestError || e instanceof TimeoutError || e instanceof WebSocketRequestError) return true;
    const notNow = e instanceof InternalRpcError || e instanceof LimitExceededRpcError || (e instanceof RpcRequestError && UNAVAILABLE_RPC_CODES.has(e.code));
    return notNow && !CALL_REFUSAL.test(`${(e as BaseError).details} ${(e as BaseError).shortMessage}`);
  });
}
