import type PgModule from 'pg';
import { PostgresGroupCommit } from './postgres-group-commit.ts';
import type { UnitRunner } from './write-units.ts';

/**
 * Several PostgreSQL group commits side by side ("lanes"), each running its batches one after
 * another on its own pool connection (pipelined: postgres-group-commit.ts), and each wallet always
 * in the same lane (by a hash of its address). So the server works on as many batches at once as
 * there are lanes, and yet no two batches ever hold or wait for the same wallet's row lock: they
 * cannot deadlock with each other, and one hot wallet never makes another lane wait. Everything else a ledger unit writes belongs to one wallet too
 * (its keys' spend and totals, its reservations, its days), so lanes share no locked row.
 */
export function postgresLanes(pool: PgModule.Pool, lanes: number): UnitRunner {
  const writers = Array.from({ length: Math.max(1, lanes) }, () => new PostgresGroupCommit(pool));
  return (unit, opts = {}) => {
    const wallet = opts.wallet?.toLowerCase();
    return writers[wallet === undefined ? 0 : laneOf(wallet, writers.length)]!.submit(unit, { ...opts, wallet });
  };
}

/** FNV-1a over the address, lower-cased (addresses reach the ledger in either case). */
export function laneOf(wallet: string, lanes: number): number {
  let h = 0x811c9dc5;
  const s = wallet.toLowerCase();
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return (h >>> 0) % lanes;
}
