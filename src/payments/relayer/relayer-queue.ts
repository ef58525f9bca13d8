import { RelayerCouldNotSend } from './broadcast-refusal.ts';

/**
 * One relayer key sends one transaction at a time per chain.
 *
 * viem gives a transaction the chain's `pending` transaction count as its nonce. Two sends that
 * overlap read the same count, and the node refuses the second ("nonce too low"): concurrent payers
 * would be rejected that way. So nonce lookup, signing and `eth_sendRawTransaction` run as
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

/**
 * How long a send may wait for its turn, and how many may wait: a hung RPC holds the queue for up
 * to one RPC timeout per call, so without a bound the last of n payers waits n × that.
 * A send that would wait longer is refused at once with RelayerCouldNotSend (503
 * with Retry-After, "send the same payment again"): nothing was sent for it.
 */
export interface QueueBounds {
  waitMs: number;
  maxQueued: number;
}

export const DEFAULT_QUEUE_BOUNDS: QueueBounds = { waitMs: 10_000, maxQueued: 64 };

/** Module-wide: two facilitators in one process with the same key (tests, a CLI beside a server) share the queue. */
const tails = new Map<string, Promise<unknown>>();
const queued = new Map<string, number>();

export function sendKey(relayer: string, chainId: number): string {
  return `tollgate-relayer:${chainId}:${relayer.toLowerCase()}`;
}

export function serializedSend<R>(
  key: string,
  send: () => Promise<R>,
  acrossInstances?: CrossInstanceLock,
  bounds: QueueBounds = DEFAULT_QUEUE_BOUNDS,
): Promise<R> {
  const waiting = queued.get(key) ?? 0;
  if (waiting >= bounds.maxQueued) return Promise.reject(new RelayerCouldNotSend(`${waiting} settlements are already waiting for the relayer`));
  queued.set(key, waiting + 1);
  const previous = tails.get(key) ?? Promise.resolve();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new RelayerCouldNotSend(`the relayer's send queue did not move for ${bounds.waitMs} ms`));
    }, bounds.waitMs);
  });
  const turn = previous.then(() => {
    clearTimeout(timer);
    queued.set(key, (queued.get(key) ?? 1) - 1);
    // Given up on while it waited: its payer has had a 503, and it must not be sent behind their back.
    if (timedOut) throw new RelayerCouldNotSend('gave up waiting for the relayer');
    return acrossInstances ? acrossInstances(key, send) : send();
  });
  // The next send waits for this one to end, however it ends (or for its turn to be skipped).
  const tail = turn.catch(() => undefined);
  tails.set(key, tail);
  void tail.then(() => {
    if (tails.get(key) === tail) tails.delete(key);
    if (queued.get(key) === 0) queued.delete(key);
  });
  return Promise.race([turn, deadline]);
}
