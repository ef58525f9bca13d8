import type { FastifyInstance } from 'fastify';
import { INBOUND_TRANSLATORS, type InboundTranslator } from '../../protocols/index.ts';
import { planInbound, type PlanOptions } from '../../metered/plan/inbound.ts';
import { runChat } from '../../metered/run.ts';
import { countMessageTokens } from '../../metered/count-tokens.ts';
import { CountingBudget, SMALL_COUNT_BYTES } from '../../metered/counting-budget.ts';
import { declaredBodyBytes, jsonBodyBytes } from '../json-body.ts';
import { unauthorized } from '../../refusal.ts';
import type { Services } from '../../services.ts';
import { authenticateSpender, spenderKey } from '../auth/inference-auth.ts';
import { assertModelAllowed } from '../auth/key-checks.ts';
import { refuseUnconfiguredProvider } from '../inference/provider-ready.ts';
import { exchangeOf } from '../inference/reply-sink.ts';
import { reserveWithinBalance } from '../inference/balance-fit.ts';
import { responsesInbound } from '../../protocols/openai-responses/inbound.ts';
import { prepareResponsesRequest } from '../inference/stored-responses.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The inbound protocol a chat route speaks; its errors are written in the protocol's shape. */
    inboundCodec?: InboundTranslator;
  }
}

/** The chat path, once per inbound protocol (src/protocols/index.ts lists them). */
export function chatRoutes(app: FastifyInstance, services: Services): void {
  // Keyed or, with pay-per-request on and no Authorization header, paid (src/http/auth/inference-auth.ts).
  const authenticate = (inbound: InboundTranslator) => authenticateSpender(services, inbound.apiKeyHeader);
  for (const inbound of INBOUND_TRANSLATORS) {
    const config = { openaiCompatible: inbound.openaiCompatible, inboundCodec: inbound };
    app.post(inbound.path, { config, bodyLimit: services.config.limits.chatBodyBytes, onRequest: authenticate(inbound) }, async (request, reply) => {
      // Everything that can refuse the request is decided before the first byte of the answer, so a
      // stream that cannot be paid for is a plain 402, not a broken stream.
      const key = await spenderKey(services, request);
      if (!key) {
        // Loaded by the first anonymous request: it pulls in x402's payment code.
        const { payPerRequest, paidChat } = await import('../x402/pay-per-request.ts');
        return payPerRequest(services, request, reply, paidChat(services, request, reply, inbound));
      }
      // Responses: references to the key's stored responses become the items they name, so
      // the plan below bounds and reserves the whole conversation.
      const prepared = inbound === responsesInbound ? await prepareResponsesRequest(services, request, key) : { body: request.body };
      const opts: PlanOptions = { betas: request.headers['anthropic-beta'] };
      const plan = planInbound(inbound, prepared.body, services.catalog, services.config, opts);
      assertModelAllowed(key, plan.model.id);
      refuseUnconfiguredProvider(services, request, plan);
      void reply.headers(plan.responseHeaders ?? {});
      const exchange = () => ({ ...exchangeOf(request, reply, inbound), keeper: prepared.keeper });
      const reserved = await runChat(services.chat, exchange(), key, plan);
      if (reserved.ok) return reply;
      return reserveWithinBalance(services, reply, request, { inbound, body: prepared.body, exchange }, key, plan, opts, reserved);
    });
  }

  // Anthropic's token count (Claude Code and the SDKs call it): answered by the gateway, never by a
  // paid model, never reserved or billed; authenticated and rate-limited as chat (the same window),
  // with its own body limit and a bound on the bodies being counted at once (CountingBudget).
  const messages = INBOUND_TRANSLATORS.find((t) => t.path === '/v1/messages');
  if (messages) {
    const config = { openaiCompatible: false, inboundCodec: messages };
    const bodyLimit = services.config.limits.countTokensBodyBytes;
    const budget = new CountingBudget({ perWalletBytes: 2 * bodyLimit, instanceBytes: 8 * bodyLimit, alwaysAdmittedBytes: SMALL_COUNT_BYTES });
    // Never paid: with pay-per-request on, a count with no key is still the 401 on its headers.
    // A count the budget refuses at its declared size (Content-Length) is refused there too, before
    // the wallet's chat window counts it: a refusal must not use up the wallet's chat requests (nor
    // its body be read). One refused only once its body is in (the budget taken meanwhile, or a
    // chunked body of no declared size) keeps its slot: it cost a read and a parse, which the window
    // is there to bound.
    const onRequest = authenticateSpender(services, messages.apiKeyHeader, false, (request, key) => {
      const declared = declaredBodyBytes(request);
      // Over the body limit it is the 413, whatever the budget holds.
      if (declared !== undefined && declared <= bodyLimit) budget.check(key.wallet, declared);
    });
    app.post('/v1/messages/count_tokens', { config, bodyLimit, onRequest }, async (request, reply) => {
      const key = await spenderKey(services, request);
      if (!key) throw unauthorized('missing API key; send "x-api-key: sk-…" or "Authorization: Bearer sk-…"');
      const release = budget.take(key.wallet, jsonBodyBytes(request));
      try {
        const { inputTokens } = await countMessageTokens(request.body, services.catalog, (model) => assertModelAllowed(key, model.id));
        return reply.header('x-tollgate-usage-estimated', 'true').send({ input_tokens: inputTokens });
      } finally {
        release();
      }
    });
  }
}
