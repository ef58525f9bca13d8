import { z } from 'zod';
import type { Services } from '../services.ts';
import { ApiError } from './errors.ts';

/** The `message` + `signature` pair, from a JSON body or a query string. */
export const siweProofFields = {
  message: z.string({ error: 'is required (a prepared SIWE message)' }),
  signature: z.string({ error: 'is required (the hex wallet signature of message)' }),
};

/** Verifies a SIWE proof and returns the lowercase address, or throws the 401/503. */
export async function requireSiwe(services: Services, message: unknown, signature: unknown): Promise<string> {
  const result = await services.siwe.verify(message, signature);
  if (result.ok) return result.address;
  throw new ApiError(result.status, result.status === 503 ? 'SERVICE_UNAVAILABLE' : 'UNAUTHORIZED', result.reason);
}
