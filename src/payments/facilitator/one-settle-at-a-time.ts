import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';

/**
 * One settle per authorization at a time, in this process. An authorization (a signed EIP-3009 or
 * Permit2 transfer) can move money once: a second settle sent while the first one's transaction
 * waits for its block would be verified against the chain as it was, and sent again, to revert on
 * the nonce at the relayer's cost. So callers of the same authorization queue behind each other:
 *
 * - a caller asking for exactly what the running call asks for (same payload, same requirements: a
 *   retrying proxy, a resource server sending twice) gets that call's result, and nothing is sent;
 * - a caller asking for something else (another amount of an `upto` authorization) runs once the
 *   call before it has finished, and so sees the chain after it: a spent nonce is refused at verify,
 *   and a transaction still pending is waited on (the upto scheme's store of pending settlements).
 *
 * The key is the payer and the nonce (EIP-3009's authorization nonce, Permit2's nonce), not the
 * signature: one payer can sign two transfers on one nonce, and only one of them can land.
 */
export function oneSettleAtATime<R>(): (payload: PaymentPayload, requirements: PaymentRequirements, settle: () => Promise<R>) => Promise<R> {
  const running = new Map<string, { terms: string; done: Promise<R> }>();
  return async (payload, requirements, settle) => {
    const key = authorizationKey(payload);
    if (!key) return settle();
    const terms = JSON.stringify([payload, requirements]);
    const ahead = running.get(key);
    if (ahead?.terms === terms) return ahead.done;
    const done = (ahead ? ahead.done.then(noop, noop) : Promise.resolve()).then(settle);
    const entry = { terms, done };
    running.set(key, entry);
    try {
      return await done;
    } finally {
      if (running.get(key) === entry) running.delete(key);
    }
  };
}

const noop = () => {};

/** `network:payer:nonce` of an EIP-3009 or Permit2 payload (exact or upto); undefined for any other form. */
export function authorizationKey(payload: PaymentPayload): string | undefined {
  const inner = payload.payload as { authorization?: { from?: unknown; nonce?: unknown }; permit2Authorization?: { from?: unknown; nonce?: unknown } };
  const auth = inner?.permit2Authorization ?? inner?.authorization;
  if (typeof auth?.from !== 'string' || (typeof auth.nonce !== 'string' && typeof auth.nonce !== 'number')) return undefined;
  const kind = inner.permit2Authorization ? 'permit2' : 'eip3009';
  return `${payload.accepted?.network}:${kind}:${auth.from.toLowerCase()}:${String(auth.nonce).toLowerCase()}`;
}
