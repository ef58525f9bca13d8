import { sql, type Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import type { Engine } from '../../storage/database.ts';
import { RelayerCouldNotSend } from './broadcast-refusal.ts';
import type { CrossInstanceLock } from './relayer-queue.ts';

/**
 * The lock that makes instances sharing one relayer key send one at a time (relayer-queue.ts):
 * a PostgreSQL advisory lock held by a transaction around the send, released by its commit, or by
 * the server when the instance dies. SQLite serves one gateway process (its file is local), so the
 * in-process queue is all it needs.
 */
/** A holder idle this long inside its send is taken for dead: a send is a few RPC calls of at most rpcTimeout (10 s) each. */
const IDLE_HOLDER_MS = 60_000;

export function relayerLockFor(engine: Engine, db: Kysely<Database>, lockTimeoutMs: number): CrossInstanceLock | undefined {
  if (engine !== 'postgres') return undefined;
  return async (key, send) => {
    let sent: { value: Awaited<ReturnType<typeof send>> } | undefined;
    let sendFailed: { err: unknown } | undefined;
    try {
      return await db.transaction().execute(async (trx) => {
        // Bounded waits: an instance frozen while it holds the lock (SIGSTOP,
        // a GC pause, a hung host) must not hold every other instance's payers without an answer.
        // Past lock_timeout the wait fails, which is a 503 "send the same payment again" below. The
        // holder's own session is ended by the server once it sits idle in this transaction far longer
        // than any send takes (several RPC timeouts), which frees the lock for the others.
        await sql.raw(`set local lock_timeout = ${Math.max(1, Math.round(lockTimeoutMs))}`).execute(trx);
        await sql.raw(`set local idle_in_transaction_session_timeout = ${IDLE_HOLDER_MS}`).execute(trx);
        await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
        try {
          sent = { value: await send() };
          return sent.value;
        } catch (err) {
          sendFailed = { err };
          throw err;
        }
      });
    } catch (err) {
      // Sent, and only the commit failed: the transaction is out, and the lock went with the session.
      if (sent) return sent.value;
      if (sendFailed) throw sendFailed.err;
      // The lock could not be taken (database unreachable): nothing was sent, the payer is not at fault.
      throw new RelayerCouldNotSend(`the relayer's send lock could not be taken in the database (${(err as Error).name})`);
    }
  };
}
