import { hashKey, KEY_PATTERN, findActiveKey, type KeyRow } from '../keys/api-keys.ts';
import type { Services } from '../services.ts';
import { unauthorized } from './errors.ts';

/** Reads `Authorization: Bearer sk-…` and returns the active key, or throws 401. */
export async function requireApiKey(services: Services, header: string | undefined): Promise<KeyRow> {
  const key = bearerToken(header);
  if (!key) throw unauthorized('missing API key; send "Authorization: Bearer sk-…" (create a key with POST /v1/auth/keys)');
  // A token that cannot be one of our keys is refused without a database round trip.
  const row = KEY_PATTERN.test(key) ? await findActiveKey(services.storage.db, hashKey(services.keySecret, key)) : undefined;
  if (!row) throw unauthorized('invalid or revoked API key');
  return row;
}

export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}
