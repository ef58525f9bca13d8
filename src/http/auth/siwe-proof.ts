import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Services } from '../../services.ts';
import { permittedBy, signFor, type Operation } from '../../siwe/actions.ts';
import { authFailureLimit } from './auth-failure-limit.ts';
import { ApiError } from '../../refusal.ts';

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

/** Who signed a proof, and every operation its statement permits (src/siwe/actions.ts). */
export interface SiweGrant {
  wallet: string;
  permits: readonly Operation[];
}

/** True when a request carries any part of a SIWE proof (then the proof alone decides). */
export function hasProof(proof: SiweProofInput): boolean {
  return proof.message !== undefined || proof.signature !== undefined;
}

/**
 * Verifies a SIWE proof made for `operation` and returns its signer (lowercase) with what else its
 * statement permits, or throws the 401/403/503 (429 once the client address has failed too often,
 * see auth-failure-limit.ts). A proof signed for another action is 403 and keeps its nonce.
 */
export function requireSiwe(services: Services, request: FastifyRequest, proof: SiweProofInput, operation: Operation): Promise<SiweGrant> {
  const minutes = services.config.dashboard.sessionMinutes;
  return authFailureLimit(services).guard(request, async () => {
    if (proof.message === undefined || proof.signature === undefined) {
      throw new ApiError(
        401,
        'UNAUTHORIZED',
        `missing SIWE ${proof.message === undefined ? 'message' : 'signature'}; send message (a prepared SIWE message, see GET /v1/auth/siwe) and signature (the wallet's signature of it): ${signFor(operation, minutes)}`,
      );
    }
    const accepts = (statement: string | undefined) =>
      permittedBy(statement, minutes).includes(operation) ? null : `this SIWE proof was not signed for this action; ${signFor(operation, minutes)}`;
    const result = await services.siwe.verify(proof.message, proof.signature, accepts);
    if (result.ok) return { wallet: result.address, permits: permittedBy(result.statement, minutes) };
    throw new ApiError(result.status, CODES[result.status], result.reason);
  });
}

const CODES = { 401: 'UNAUTHORIZED', 403: 'FORBIDDEN', 503: 'SERVICE_UNAVAILABLE' } as const;
