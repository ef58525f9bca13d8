import type { FastifyRequest } from 'fastify';
import type { AnswerKeeper } from '../../metered/sink.ts';
import type { KeyRow } from '../../keys/api-keys.ts';
import type { Services } from '../../services.ts';
import { responseKeeper } from '../../stored-responses/keeper.ts';
import { resolveStoredReferences } from '../../stored-responses/resolve.ts';
import { jsonBodyBytes } from '../json-body.ts';

/**
 * A keyed POST /v1/responses, before it is planned: its references to stored responses resolved
 * against the key that sent it (a response is the key's that stored it, not the whole wallet's), so
 * the reservation bounds the whole conversation and the expanded request is held to
 * limits.chatBodyBytes like one sent whole; and the keeper that stores its answer under that key
 * unless it says `store: false`. With responses.store off, the body goes on as sent and the decoder
 * refuses any reference.
 */
export async function prepareResponsesRequest(services: Services, request: FastifyRequest, key: KeyRow): Promise<{ body: unknown; keeper?: AnswerKeeper }> {
  const settings = services.config.responses.store;
  if (!settings.enabled) return { body: request.body };
  const db = services.storage.db;
  const owner = { wallet: key.wallet, apiKeyId: key.id };
  const resolved = await resolveStoredReferences(db, owner, request.body, services.now(), {
    bodyBytes: jsonBodyBytes(request),
    maxBytes: services.config.limits.chatBodyBytes,
  });
  const store = (request.body as { store?: unknown } | null)?.store !== false;
  if (!store) return { body: resolved.body };
  return {
    body: resolved.body,
    keeper: responseKeeper({ db, bounds: settings, wallet: key.wallet, apiKeyId: key.id, input: resolved.input, now: services.now, log: request.log }),
  };
}
