import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Sign-In-With-X nonces the gateway issues in its 402s, without storing them: a nonce is 16 random
 * bytes followed by an HMAC of those bytes and the challenge's issuedAt and expirationTime, under the
 * gateway's secret (the one API keys are hashed with, shared by every instance). So the gateway
 * recognises its own nonces on any instance and after a restart, a client cannot stretch a
 * challenge's validity (the times are under the MAC), and an anonymous 402 writes nothing to the
 * database. Single use is the SIWE nonce store's job (src/siwe/nonce-store.ts), at consumption.
 * Hex only: an EIP-4361 nonce is alphanumeric.
 */
const RANDOM_BYTES = 16;
const MAC_BYTES = 16;
/** Domain separation: the key secret also hashes API keys; this MAC can never collide with one. */
const LABEL = 'tollgate siwx nonce v1';

export interface SiwxWindow {
  issuedAt: string;
  expirationTime: string;
}

export function issueSiwxNonce(secret: Buffer, window: SiwxWindow): string {
  const random = randomBytes(RANDOM_BYTES).toString('hex');
  return random + mac(secret, random, window);
}

/** True when `nonce` is one this gateway issued for exactly these times. */
export function isIssuedSiwxNonce(secret: Buffer, nonce: string, window: SiwxWindow): boolean {
  if (!/^[0-9a-f]+$/.test(nonce) || nonce.length !== 2 * (RANDOM_BYTES + MAC_BYTES)) return false;
  const random = nonce.slice(0, 2 * RANDOM_BYTES);
  const expected = Buffer.from(mac(secret, random, window), 'hex');
  return timingSafeEqual(expected, Buffer.from(nonce.slice(2 * RANDOM_BYTES), 'hex'));
}

function mac(secret: Buffer, random: string, window: SiwxWindow): string {
  return createHmac('sha256', secret)
    .update(`${LABEL}\n${random}\n${window.issuedAt}\n${window.expirationTime}`)
    .digest()
    .subarray(0, MAC_BYTES)
    .toString('hex');
}
