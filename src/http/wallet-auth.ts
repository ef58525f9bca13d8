import type { FastifyRequest } from 'fastify';
import type { Services } from '../services.ts';
import { requireApiKey } from './bearer-auth.ts';
import { badRequest, unauthorized } from './errors.ts';
import { requireSiwe } from './siwe-proof.ts';
import { ADDRESS_PATTERN } from '../chain/address.ts';

/**
 * Authorises a read of `:wallet` data: an API key of that wallet, or a SIWE proof signed by that
 * wallet (in the query string). Anything else is 401, so one wallet never reads another's data.
 * Returns the lowercase wallet address.
 */
export async function requireWalletOwner(services: Services, request: FastifyRequest<{ Params: { wallet: string } }>): Promise<string> {
  const raw = request.params.wallet;
  if (!ADDRESS_PATTERN.test(raw)) throw badRequest(`"${raw.slice(0, 64)}" is not a wallet address (0x followed by 40 hex digits)`);
  const wallet = raw.toLowerCase();
  const query = (request.query ?? {}) as Record<string, unknown>;

  if (request.headers.authorization !== undefined) {
    const key = await requireApiKey(services, request);
    if (key.wallet !== wallet) throw unauthorized('this API key belongs to another wallet');
    return wallet;
  }
  if (query.message !== undefined || query.signature !== undefined) {
    const signer = await requireSiwe(services, request, query);
    if (signer !== wallet) throw unauthorized('the SIWE proof is signed by another wallet');
    return wallet;
  }
  throw unauthorized('send an API key of this wallet ("Authorization: Bearer sk-…") or a SIWE proof (message and signature query parameters)');
}
