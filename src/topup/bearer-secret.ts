import crypto from 'node:crypto';

/**
 * True when the Authorization header is exactly `Bearer <token>`, compared in constant time: `!==`
 * stops at the first differing byte, so response times would leak how much of a guess is right.
 * Both sides are hashed first, because timingSafeEqual needs equal lengths and comparing lengths
 * would leak the token's length.
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const digest = (s: string) => crypto.createHash('sha256').update(s).digest();
  return crypto.timingSafeEqual(digest(header ?? ''), digest(`Bearer ${token}`));
}
