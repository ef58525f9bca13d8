import { clientBucket } from '../client-bucket.ts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { listKeys, revokeKey, toIso } from '../../keys/api-keys.ts';
import { REDEEM_CODE_PATTERN, REF_CODE_PATTERN } from '../../codes/codes.ts';
import { createApiKey } from '../../keys/create-key.ts';
import type { Services } from '../../services.ts';
import { ApiError, badRequest, notFound } from '../../refusal.ts';
import { siweProofFields, type SiweGrant, type SiweProofInput } from '../auth/siwe-proof.ts';
import { signFor, type Operation } from '../../siwe/actions.ts';
import { requireKeyManager } from '../auth/wallet-auth.ts';
import { parseInput } from '../validate.ts';
import { LIMIT_FIELDS, applyLimitChanges, parseLimitInput, updateKeyLimits, type LimitInput } from '../../keys/key-limits.ts';
import { NO_LIMITS } from '../../keys/limits.ts';
import { currentSpend } from '../../keys/current-spend.ts';
import { keyView, limitsView } from '../key-view.ts';

const limitFields = Object.fromEntries(LIMIT_FIELDS.map((f) => [f, z.unknown().optional()])) as Record<
  (typeof LIMIT_FIELDS)[number],
  z.ZodOptional<z.ZodUnknown>
>;
import { enforceRateLimit } from '../rate-limit.ts';
import { deleteKeyResponses } from '../../stored-responses/store.ts';

const createBody = z
  .object({
    ...siweProofFields,
    label: z.string().max(100, 'must be at most 100 characters').optional(),
    ref_code: z.string().regex(REF_CODE_PATTERN, 'is not a referral code (form ref-xxxxxxxxxx)').optional(),
    redeem_code: z.string().regex(REDEEM_CODE_PATTERN, 'is not a redeem code (form rc-…)').optional(),
    ...limitFields,
  })
  .strict(); // As PATCH: a misspelt limit field (spend_limit_usd, expires) must not create an unlimited key.

const proofOnly = z.object(siweProofFields);

// Strict: a misspelt field would otherwise be dropped, and the owner would believe a limit was set.
const patchBody = z.object({ ...siweProofFields, ...limitFields }).strict();

export function keyRoutes(app: FastifyInstance, services: Services): void {
  app.post('/v1/auth/keys', async (request, reply) => {
    const body = parseInput(createBody, request.body);
    // Decided before the proof is checked, so a request that cannot succeed does not use up its nonce.
    if (body.ref_code !== undefined && body.redeem_code !== undefined) {
      throw badRequest('ref_code and redeem_code cannot be used together; send one of them');
    }
    const limits = checkedLimits(services, body);
    const created = applyLimitChanges(NO_LIMITS, limits);
    if (!created.ok) throw badRequest(created.reason);
    const { wallet } = await authorizeKeyManagement(services, request, reply, body, 'create-key');
    const outcome = await createApiKey(services.storage.db, services.storage.engine, services.keySecret, services.config.keys.maxActivePerWallet, {
      wallet,
      label: body.label ?? '',
      refCode: body.ref_code,
      redeemCode: body.redeem_code,
      limits: created.value,
    });
    if (!outcome.ok) throw badRequest(outcome.reason);
    const response: Record<string, unknown> = {
      id: outcome.row.id,
      key: outcome.key,
      label: outcome.row.label,
      created_at: toIso(outcome.row.created_at),
    };
    if (outcome.redeemedCreditUsdc !== undefined) response.redeemed_credit_usdc = outcome.redeemedCreditUsdc;
    // Shown when the owner set any, so they can check what the gateway understood.
    if (Object.keys(limits).length) Object.assign(response, limitsView(outcome.row));
    return reply.code(201).send(response);
  });

  app.get('/v1/auth/keys', async (request, reply) => {
    const query = parseInput(proofOnly, request.query, 'query string');
    const { wallet } = await authorizeKeyManagement(services, request, reply, query, 'list-keys');
    const rows = await listKeys(services.storage.db, wallet);
    const spend = await currentSpend(services.storage.db, rows);
    return { data: rows.map((r) => keyView(r, spend.get(r.id)!)) };
  });

  app.patch<{ Params: { key_id: string } }>('/v1/auth/keys/:key_id', async (request, reply) => {
    const id = parseKeyId(request.params.key_id);
    const body = parseInput(patchBody, request.body);
    // Decided before the proof is checked, so a request that cannot succeed does not use up its nonce.
    const changes = checkedLimits(services, body);
    if (!Object.keys(changes).length) throw badRequest(`send at least one of ${LIMIT_FIELDS.join(', ')} (null removes one)`);
    // Any credential that may change a key may tighten it; loosening is decided against the key's
    // current limits inside the write (src/keys/limit-direction.ts), so a stale read cannot loosen.
    const { wallet, permits } = await authorizeKeyManagement(services, request, reply, body, 'tighten-key');
    const outcome = await updateKeyLimits(services.storage.db, id, wallet, changes, permits.includes('loosen-key'));
    if (!outcome.ok) {
      if (outcome.reason === 'invalid') throw badRequest(outcome.message);
      if (outcome.reason === 'loosens') throw loosenRefused(services, outcome.fields);
      if (outcome.reason === 'contended')
        throw new ApiError(409, 'CONFLICT', `API key ${id}'s limits changed while this change was decided; nothing was changed, send it again`);
      // Another wallet's key answers exactly like a missing one, so ids reveal nothing.
      throw outcome.reason === 'not_found'
        ? notFound(`no API key ${id} belongs to this wallet`)
        : badRequest(`API key ${id} is revoked; create a new key instead`);
    }
    services.keyCache.changed(id);
    const row = (await listKeys(services.storage.db, wallet)).find((k) => k.id === id)!;
    return keyView(row, (await currentSpend(services.storage.db, [row])).get(id)!);
  });

  app.delete<{ Params: { key_id: string } }>('/v1/auth/keys/:key_id', async (request, reply) => {
    const id = parseKeyId(request.params.key_id);
    // With a dashboard session the DELETE needs no body.
    const body = parseInput(proofOnly, request.body ?? {});
    const { wallet } = await authorizeKeyManagement(services, request, reply, body, 'revoke-key');
    const outcome = await revokeKey(services.storage.db, wallet, id);
    // Another wallet's key answers exactly like a missing one, so ids reveal nothing.
    if (outcome === 'not_found') throw notFound(`no API key ${id} belongs to this wallet`);
    services.keyCache.forget(id);
    // What the key stored is unreachable from now on (a response is its key's alone): it goes, so it
    // no longer fills the wallet's store. Also on a repeated revoke, which finishes one cut short.
    await deleteKeyResponses(services.storage.db, { wallet, apiKeyId: id });
    return { revoked: true };
  });
}

/**
 * The proof (or dashboard session) of a key-management call, between its two rate limits: per
 * client IP before the signature is checked (so junk proofs cost little), per wallet after.
 * Returns the wallet and what its credential permits (src/siwe/actions.ts).
 */
async function authorizeKeyManagement(
  services: Services,
  request: FastifyRequest,
  reply: FastifyReply,
  proof: SiweProofInput,
  operation: Operation,
): Promise<SiweGrant> {
  await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
  const grant = await requireKeyManager(services, request, proof, operation);
  await enforceRateLimit(services, reply, `keys:${grant.wallet}`, services.rateWindows.keys);
  return grant;
}

/** 403 for a change that loosens a key, sent with a session or a proof not signed for loosening. */
function loosenRefused(services: Services, fields: string[]): ApiError {
  return new ApiError(
    403,
    'FORBIDDEN',
    `this change loosens ${fields.join(', ')}; the key is unchanged. ${capitalised(signFor('loosen-key', services.config.dashboard.sessionMinutes))}`,
    // Which limits it loosens, for a client that signs for loosening only when a change needs it.
    { loosens: fields },
  );
}

const capitalised = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

function checkedLimits(services: Services, body: LimitInput) {
  const parsed = parseLimitInput(body, services.catalog, Date.now());
  if (!parsed.ok) throw badRequest(parsed.reason);
  return parsed.value;
}

function parseKeyId(raw: string): number {
  if (!/^\d{1,15}$/.test(raw) || Number(raw) < 1) throw badRequest(`key_id must be a positive integer, got "${raw.slice(0, 40)}"`);
  return Number(raw);
}
