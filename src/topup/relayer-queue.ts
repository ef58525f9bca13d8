/**
 * One relayer key sends one transaction at a time per chain.
 *
 * viem gives a transaction the chain's `pending` transaction count as its nonce. Two sends that
 * overlap read the same count, and the node refuses the second ("nonce too low"): concurrent payers
 * were rejected that way (issue 23). So nonce lookup, signing and `eth_sendRawTransaction` run as
 * one step under a lock per (relayer, chain); the receipt waits that follow run concurrently outside
 * it. Once a send returns, the node counts that transaction as pending, so the next holder of the
 * lock reads the next nonce.
 *
 * The nonce is the chain's pending count read under the lock, never a counter of our own: a counter
 * that got ahead of the chain (a transaction dropped from the mempool, a send that failed after the
 * nonce was taken) would leave a gap that stalls every later settlement, while the pending count
 * heals by itself (the next send fills the gap). Its one weakness, an RPC endpoint whose nodes lag
 * each other, shows up as a nonce refusal, which is answered 503 "send the same payment again".
 *
 * Within one process an in-memory queue; gateways that share the relayer key on one PostgreSQL
 * database add a cross-instance lock (see relayer-lock.ts) inside it, so each process holds at most
 * one database connection for it. A shared `tollgate facilitator` is one process: the queue covers it.
 */
export type CrossInstanceLock = <R>(key: string, fn: () => Promise<R>) => Promise<R>;

/** Module-wide: two facilitators in one process with the same key (tests, a CLI beside a server) share the queue. */
const tails = new Map<string, Promise<unknown>>();

export function sendKey(relayer: string, chainId: number): string {
  return `tollgate-relayer:${chainId}:${relayer.toLowerCase()}`;
}

export function serializedSend<R>(key: string, send: () => Promise<R>, acrossInstances?: CrossInstanceLock): Promise<R> {
  const previous = tails.get(key) ?? Promise.resolve();
  const run = previous.then(() => (acrossInstances ? acrossInstances(key, send) : send()));
  // The next send waits for this one to end, however it ends.
  const tail = run.catch(() => undefined);
  tails.set(key, tail);
  void tail.then(() => {
    if (tails.get(key) === tail) tails.delete(key);
  });
  return run;
}
