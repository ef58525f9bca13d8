import type { Kysely } from 'kysely';
import type { AnswerKeeper, KeptAnswer } from '../metered/sink.ts';
import type { Database } from '../storage/schema.ts';
import { keyRevoked, saveResponse, storedRow, walletHolding } from './store.ts';

/** The bounds of responses.store (config). */
export interface StoreBounds {
  ttlSeconds: number;
  maxBytesPerResponse: number;
  maxStoredPerWallet: number;
  maxBytesPerWallet: number;
}

export interface KeeperSources {
  db: Kysely<Database>;
  bounds: StoreBounds;
  wallet: string;
  apiKeyId: number;
  /** The request's input items, references resolved (resolve.ts). */
  input: unknown[];
  now: () => number;
  log: { warn(fields: Record<string, unknown>, message: string): void };
}

/** Why a response asked to be stored was not: the `x-tollgate-store` header's value. */
export type NotStored = 'too_large' | 'wallet_full' | 'key_revoked' | 'unavailable';

/**
 * Keeps a billed Response under the key that asked for it: only that key reads, continues or
 * deletes it, while the per-wallet bounds count all of the wallet's keys together. The chat core
 * calls it after the settle, before the answer's last byte, so a client that reads the answer can
 * refer to it at once. `bytes` counts the row and its items' copies. A response beyond a bound, or one
 * the database would not take, is still delivered (it is paid for): it says `store: false`, and a
 * JSON answer carries `x-tollgate-store: not-stored; reason=…`.
 */
export function responseKeeper(s: KeeperSources): AnswerKeeper {
  return {
    async keep(answerJson: string): Promise<KeptAnswer> {
      const response = JSON.parse(answerJson) as Record<string, unknown> & { id: string; output: unknown[] };
      const reason = await store(s, response);
      const kept = { ...response, store: reason === null };
      return { answer: JSON.stringify(kept), headers: { 'x-tollgate-store': reason === null ? 'stored' : `not-stored; reason=${reason}` } };
    },
  };
}

async function store(s: KeeperSources, response: Record<string, unknown> & { id: string; output: unknown[] }): Promise<NotStored | null> {
  const stored = { ...response, store: true };
  // What the row and its items' copies take, serialised once here and written as is.
  const row = storedRow(s.input, stored);
  const { bytes } = row;
  const { bounds } = s;
  if (bytes > bounds.maxBytesPerResponse) return notStored(s, response.id, 'too_large', { bytes, maxBytesPerResponse: bounds.maxBytesPerResponse });
  const now = s.now();
  try {
    // Checked, then written: requests of one wallet running at once may each pass the check, so the
    // bound holds up to the wallet's concurrent requests (rate-limited), not to the byte.
    // A request that was running when its key was revoked: revoking deleted what the key stored, and
    // what it would store now no key could read or delete, while it filled the wallet's bounds.
    if (await keyRevoked(s.db, s.apiKeyId)) return notStored(s, response.id, 'key_revoked', { apiKeyId: s.apiKeyId });
    const holding = await walletHolding(s.db, s.wallet, now);
    if (holding.count >= bounds.maxStoredPerWallet || holding.bytes + bytes > bounds.maxBytesPerWallet) {
      return notStored(s, response.id, 'wallet_full', {
        ...holding,
        maxStoredPerWallet: bounds.maxStoredPerWallet,
        maxBytesPerWallet: bounds.maxBytesPerWallet,
      });
    }
    await saveResponse(
      s.db,
      { id: response.id, wallet: s.wallet, apiKeyId: s.apiKeyId, input: s.input, response: stored, now, expiresAt: now + bounds.ttlSeconds * 1000 },
      row,
    );
    return null;
  } catch (err) {
    return notStored(s, response.id, 'unavailable', { err });
  }
}

function notStored(s: KeeperSources, id: string, reason: NotStored, fields: Record<string, unknown>): NotStored {
  s.log.warn({ responseId: id, wallet: s.wallet, reason, ...fields }, 'a response asked to be stored was delivered but not stored');
  return reason;
}
