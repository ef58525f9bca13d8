import { PaymentPayloadSchema, PaymentRequirementsSchema } from '@x402/core/schemas';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.ts';
import { FacilitatorUnavailable } from '../payments/facilitator/facilitator.ts';
import { oneSettleAtATime } from '../payments/facilitator/one-settle-at-a-time.ts';
import { createFacilitator } from '../payments/service.ts';
import { bearerMatches } from './auth/secret-compare.ts';

/**
 * `tollgate facilitator`: the local facilitator served over the x402 facilitator HTTP API
 * (POST /verify, POST /settle, GET /supported), so one relayer key can serve several gateway
 * instances that use `topup.facilitator.type: remote`.
 *
 * It only settles payments to the configured topup.payTo: an open relayer would pay gas for
 * anyone's payments. With a token set, every call must carry it as a Bearer token.
 *
 * Why it lives in http/: it is an HTTP entry point, a Fastify server of its own, so it
 * belongs to the HTTP layer that may import Fastify (scripts/import-graph.mjs LAYER_ROOTS), beside
 * the gateway's routes. What it settles with, the facilitator itself, stays in payments/facilitator/.
 */
export interface FacilitatorServerOptions {
  host: string;
  port: number;
  logger: Logger;
  token?: string;
}

export async function startFacilitatorServer(config: Config, opts: FacilitatorServerOptions): Promise<{ app: FastifyInstance; url: string; relayer: string }> {
  if (config.topup.facilitator.type !== 'local') {
    throw new Error('tollgate facilitator settles with its own relayer key: set topup.facilitator.type to local in its configuration');
  }
  if (config.topup.offers.length === 0 || !config.topup.payTo) {
    throw new Error('tollgate facilitator needs topup.payTo and topup.offers (the networks and tokens it settles)');
  }
  const facilitator = createFacilitator(config) as ReturnType<typeof createFacilitator> & { relayer: string };
  const payTo = config.topup.payTo.toLowerCase();
  const app = Fastify({ loggerInstance: opts.logger as FastifyBaseLogger, bodyLimit: 64 * 1024 });

  app.addHook('onRequest', async (request, reply) => {
    if (opts.token && !bearerMatches(request.headers.authorization, opts.token)) {
      return reply.code(401).send({ error: 'UNAUTHORIZED', message: 'send the facilitator token as "Authorization: Bearer <token>"' });
    }
  });

  const parse = (body: unknown): { payload: PaymentPayload; requirements: PaymentRequirements } | { reason: string; message: string } => {
    const b = (body ?? {}) as Record<string, unknown>;
    const payload = PaymentPayloadSchema.safeParse(b.paymentPayload);
    const requirements = PaymentRequirementsSchema.safeParse(b.paymentRequirements);
    if (!payload.success || !requirements.success)
      return { reason: 'invalid_payload', message: 'send {paymentPayload, paymentRequirements} as the x402 facilitator API defines them' };
    const req = requirements.data as PaymentRequirements;
    if (req.payTo.toLowerCase() !== payTo)
      return { reason: 'pay_to_not_served', message: 'this facilitator settles only payments to its own payTo (topup.payTo in its configuration)' };
    // The schemes read the amount with BigInt, which throws on "1.5" (a 500) and reads "" or " " as
    // 0: an upto settle of 0 answers success with nothing sent. So only digits pass.
    const amount =
      badAmount(req.amount, 'paymentRequirements.amount') ?? badAmount((payload.data as PaymentPayload).accepted?.amount, 'paymentPayload.accepted.amount');
    if (amount) return { reason: 'invalid_amount', message: amount };
    return { payload: payload.data as PaymentPayload, requirements: req };
  };
  // One settle per authorization at a time (one-settle-at-a-time.ts): a caller repeating the running
  // call gets its result, and nothing is sent twice.
  const settleOnce = oneSettleAtATime<Awaited<ReturnType<typeof facilitator.settle>>>();

  app.post('/verify', async (request, reply) => {
    const input = parse(request.body);
    if ('reason' in input) return reply.code(400).send({ isValid: false, invalidReason: input.reason, invalidMessage: input.message });
    try {
      return await facilitator.verify(input.payload, input.requirements);
    } catch (err) {
      return unavailable(reply, err);
    }
  });

  app.post('/settle', async (request, reply) => {
    const input = parse(request.body);
    if ('reason' in input)
      return reply.code(400).send({ success: false, errorReason: input.reason, errorMessage: input.message, transaction: '', network: '' });
    try {
      return await settleOnce(input.payload, input.requirements, () => facilitator.settle(input.payload, input.requirements));
    } catch (err) {
      return unavailable(reply, err);
    }
  });

  app.get('/supported', async () => ({ ...(await facilitator.supported()), signers: { 'eip155:*': [facilitator.relayer] } }));
  app.get('/health', async () => ({ status: 'ok' }));

  await app.listen({ host: opts.host, port: opts.port });
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return { app, url: `http://${opts.host === '0.0.0.0' ? '127.0.0.1' : opts.host}:${port}`, relayer: facilitator.relayer };
}

function unavailable(reply: { code(n: number): { send(b: unknown): unknown } }, err: unknown) {
  if (err instanceof FacilitatorUnavailable) return reply.code(503).send({ error: 'FACILITATOR_UNAVAILABLE', message: err.message });
  throw err;
}

/** Why `amount` is not a whole number of the token's smallest unit written in digits, or undefined if it is. */
function badAmount(amount: unknown, field: string): string | undefined {
  if (amount === undefined || (typeof amount === 'string' && /^\d+$/.test(amount))) return undefined;
  return `${field} must be a whole number of the token's smallest unit written in digits only (e.g. "250000" for 0.25 of a 6-decimal token), not ${JSON.stringify(amount)}`;
}
