import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Services } from '../services.ts';
import { authFailureLimit } from './auth-failure-limit.ts';
import { ApiError } from './errors.ts';

/**
 * The `message` + `signature` pair, from a JSON body or a query string. Not checked here: a missing
 * or malformed proof is a failed authentication (401, spec section 5 rule 1), not a 400.
 */
export const siweProofFields = {
  message: z.unknown().optional(),
  signature: z.unknown().optional(),
};

export interface SiweProofInput {
  message?: unknown;
  signature?: unknown;
}

/**
 * Verifies a SIWE proof and returns the lowercase address, or throws the 401/503 (429 once the
 * client address has failed too often, see auth-failure-limit.ts).
 */
export function requireSiwe(services: Services, request: FastifyRequest, proof: SiweProofInput): Promise<string> {
  return authFailureLimit(services).guard(request, async () => {
    if (proof.message === undefined || proof.signature === undefined) {
      throw new ApiError(401, 'UNAUTHORIZED', `missing SIWE ${proof.message === undefined ? 'message' : 'signature'}; send message (a prepared SIWE message, see GET /v1/auth/siwe) and signature (the wallet's signature of it)`);
    }
    const result = await services.siwe.verify(proof.message, proof.signature);
    if (result.ok) return result.address;
    throw new ApiError(result.status, result.status === 503 ? 'SERVICE_UNAVAILABLE' : 'UNAUTHORIZED', result.reason);
  });
}
