import crypto from 'node:crypto';

/**
 * Compares a secret a client sent with the expected one in constant time: `!==` stops at the first
 * differing byte, so response times would leak how much of a guess is right. Both sides are hashed
 * first, because timingSafeEqual needs equal lengths and comparing lengths would leak the secret's
 * length. Used for the facilitator's and the metrics endpoint's bearer tokens.
 */
export function secretMatches(given: string | null | undefined, expected: string): boolean {
  const digest = (s: string) => crypto.createHash('sha256').update(s).digest();
  return typeof given === 'string' && crypto.timingSafeEqual(digest(given), digest(expected));
}

/** True when the Authorization header is exactly `Bearer <token>`, compared in constant time. */
export function bearerMatches(header: string | undefined, token: string): boolean {
  return secretMatches(header ?? '', `Bearer ${token}`);
}
