import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import { deleteResponse, findResponse } from '../../stored-responses/store.ts';
import { requireApiKey } from '../auth/bearer-auth.ts';
import type { KeyRow } from '../../keys/api-keys.ts';
import { ApiError } from '../../refusal.ts';
import { enforceRateLimit } from '../rate-limit.ts';

/**
 * GET and DELETE /v1/responses/{id}, as OpenAI has them: the stored Response, and its deletion
 * (`{id, object: "response", deleted: true}`). Only the API key that stored it may read or delete
 * it; anything else (another key's, of the same wallet or not, expired, deleted, never stored, an id
 * not in the encoder's shape, which is never queried) is the same 404. A revoked or rotated key's
 * responses are therefore unreachable until they expire. Served with responses.store off too: what
 * was stored stays readable and deletable until it expires.
 */
export function responseRoutes(app: FastifyInstance, services: Services): void {
  const config = { openaiCompatible: true };
  const gone = (id: string) =>
    new ApiError(
      404,
      'NOT_FOUND',
      `no stored response with id ${JSON.stringify(id.slice(0, 80))} for this API key (it may never have been stored, been deleted, expired, or been stored with another key)`,
      { param: 'response_id' },
    );

  app.get<{ Params: { id: string } }>('/v1/responses/:id', { config }, async (request, reply) => {
    const key = await requireApiKey(services, request);
    await enforceRateLimit(services, reply, `chat:${key.wallet}`, services.rateWindows.chat);
    const stored = await findResponse(services.storage.db, ownerOf(key), request.params.id, services.now());
    if (!stored) throw gone(request.params.id);
    return stored.response;
  });

  app.delete<{ Params: { id: string } }>('/v1/responses/:id', { config }, async (request, reply) => {
    const key = await requireApiKey(services, request);
    await enforceRateLimit(services, reply, `chat:${key.wallet}`, services.rateWindows.chat);
    if (!(await deleteResponse(services.storage.db, ownerOf(key), request.params.id, services.now()))) throw gone(request.params.id);
    return { id: request.params.id, object: 'response', deleted: true };
  });
}

const ownerOf = (key: KeyRow) => ({ wallet: key.wallet, apiKeyId: key.id });
