import { HttpRequestError, keccak256, TimeoutError, WebSocketRequestError, type Chain, type Hex, type LocalAccount } from 'viem';
import { relayerRefusal, RelayerCouldNotSend } from './broadcast-refusal.ts';
import { someErrorInChain } from '../../outage.ts';

/** A transaction of the relayer's, before its nonce, gas and fees are filled in. */
export interface RelayerTx {
  to: Hex;
  data: Hex;
}

/** The two RPC calls a send makes (viem's wallet client with public actions). */
export interface RelayerClient {
  chain: Chain;
  prepareTransactionRequest(args: { account: LocalAccount; chain: Chain; to: Hex; data: Hex; nonce: number }): Promise<unknown>;
  sendRawTransaction(args: { serializedTransaction: Hex }): Promise<Hex>;
}

/**
 * One send of the relayer's, in three stages whose failures mean different things:
 *
 * 1. prepare (gas estimate, fees): the transaction is simulated. A revert here is the payer's
 *    (funds moved away, authorization used), and is thrown as it is; the node's words for the
 *    relayer's own shortfall (no gas money) are the relayer's.
 * 2. sign, locally, and record the hash (`onSigned`) BEFORE anything is sent: from here on the
 *    transaction may exist, and a crash or a lost answer must leave its hash to reconcile.
 * 3. `eth_sendRawTransaction`: the simulation passed, so any JSON-RPC error is the relayer's
 *    problem (pool full, account limit, fee cap, nonce, balance: whatever the node's wording), and
 *    is thrown as RelayerCouldNotSend (503, "send the same payment again"). The regexes only label
 *    it for logs. A transport error (timeout, connection reset) means the node may have taken it:
 *    the hash is returned as sent, and the receipt wait and the reconciler find out.
 *
 * A refusal leaves the hash recorded by `onSigned`; the caller clears it (nothing was sent under it),
 * and the reconciler still watches the released payment in case it was (see reconciler.ts).
 */
export async function signAndSend(
  client: RelayerClient,
  account: LocalAccount,
  tx: RelayerTx,
  nonce: number,
  onSigned?: (hash: Hex) => Promise<void>,
): Promise<Hex> {
  let prepared;
  try {
    prepared = await client.prepareTransactionRequest({ account, chain: client.chain, to: tx.to, data: tx.data, nonce });
  } catch (err) {
    const refusal = relayerRefusal(err);
    if (refusal) throw new RelayerCouldNotSend(refusal, { cause: err });
    throw err;
  }
  const raw = await account.signTransaction(prepared as Parameters<typeof account.signTransaction>[0]);
  const hash = keccak256(raw);
  await onSigned?.(hash);
  try {
    await client.sendRawTransaction({ serializedTransaction: raw });
  } catch (err) {
    if (answerLost(err)) return hash; // possibly sent: see above
    const label = relayerRefusal(err);
    // The node holds this very transaction already: it is sent.
    if (label === 'transaction already known') return hash;
    throw new RelayerCouldNotSend(label ?? `the node refused the relayer's transaction: ${shortMessage(err)}`, { cause: err });
  }
  return hash;
}

/**
 * The send's answer never arrived (connection, HTTP status, timeout), as opposed to a JSON-RPC
 * error, which is the node's answer: it did not take the transaction. Deliberately narrower than
 * rpc-errors.ts's isTransportError, which also counts some JSON-RPC codes as "the RPC cannot serve
 * now": for a send, any answer means "not taken" (503), and only silence means "maybe taken" (202).
 */
function answerLost(err: unknown): boolean {
  return someErrorInChain(err, (e) => e instanceof HttpRequestError || e instanceof TimeoutError || e instanceof WebSocketRequestError);
}

function shortMessage(err: unknown): string {
  const e = err as { details?: string; shortMessage?: string; message?: string };
  return (e.details ?? e.shortMessage ?? e.message ?? String(err)).slice(0, 120);
}
