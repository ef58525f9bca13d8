import type { FastifyReply, FastifyRequest } from 'fastify';
import { affordablePromptTokens, fitMaxTokens } from '../../metered/fit.ts';
import { planInbound, type PlanOptions } from '../../metered/plan/inbound.ts';
import type { ChatPlan } from '../../metered/plan/plan.ts';
import { runChat, type ChatExchange, type RunOutcome } from '../../metered/run.ts';
import type { KeyRow } from '../../keys/api-keys.ts';
import type { InboundTranslator } from '../../protocols/index.ts';
import type { Services } from '../../services.ts';
import { balanceRefusal, coverable, type RefusedReservation } from '../../metered/reservation-refusal.ts';
import { tightenPromptBound } from '../../metered/token-bound/tighten.ts';

/** The header that asks for the balance fit on one request ("true"), or turns a model's default off ("false"). */
export const FIT_HEADER = 'x-tollgate-fit-max-tokens';

export function wantsFit(request: FastifyRequest, plan: ChatPlan): boolean {
  const asked = request.headers[FIT_HEADER];
  if (typeof asked === 'string' && /^(true|1)$/i.test(asked.trim())) return true;
  if (typeof asked === 'string' && /^(false|0)$/i.test(asked.trim())) return false;
  return plan.model.fitMaxTokens;
}

type FitRequest = { inbound: InboundTranslator; body: unknown; exchange: () => ChatExchange };

/**
 * A request whose reservation at the byte bound was refused. Where its deployments name their
 * tokenizer, the prompt bound is counted with it (src/metered/token-bound/) and the request reserved
 * again at that lower amount; then, if asked, the balance fit lowers max_tokens; else the 402 says
 * what the request needs and what the balance covers.
 */
export async function reserveWithinBalance(
  services: Services,
  reply: FastifyReply,
  request: FastifyRequest,
  req: FitRequest,
  key: KeyRow,
  first: ChatPlan,
  opts: PlanOptions,
  refused: RefusedReservation,
): Promise<FastifyReply> {
  let plan = first;
  let outcome: RunOutcome = refused;
  const fit = wantsFit(request, first);
  // The least output the request can run with: what it asks, or the fit's floor.
  const output = fit ? Math.min(services.config.chat.fitMaxTokensFloor, first.maxTokens) : first.maxTokens;
  const tight = await tightenPromptBound(first, affordablePromptTokens(first, output, await coverable(services.storage.db, key, refused)));
  if (tight !== first) {
    plan = tight;
    outcome = await runChat(services.chat, req.exchange(), key, plan);
    if (outcome.ok) return reply;
  }
  if (fit) return fitToBalance(services, reply, req, key, plan, opts, outcome);
  throw await balanceRefusal(services.storage.db, key, plan, outcome);
}

/** How many attempts the fit makes: the balance, then the key's limit (or the reverse), then once more after a race. */
const FIT_ATTEMPTS = 3;

/**
 * The balance fit: the reservation was refused, so max_tokens is lowered to what the smaller of the
 * wallet's available balance and the key's remaining spend limit covers, when that is at least
 * `chat.fitMaxTokensFloor`, and the request is planned and reserved again. Each reservation is the
 * plan's own, made atomically by the ledger, so a request running beside it (another fitted one,
 * on this instance or another) cannot make it exceed the balance: the reserve is refused instead,
 * and the fit tries again with the smaller amount. `x-tollgate-max-tokens-fitted` says the value used.
 */
export async function fitToBalance(
  services: Services,
  reply: FastifyReply,
  req: FitRequest,
  key: KeyRow,
  first: ChatPlan,
  opts: PlanOptions,
  refused: RefusedReservation,
): Promise<FastifyReply> {
  const floor = services.config.chat.fitMaxTokensFloor;
  let plan = first;
  let outcome: RunOutcome = refused;
  let available = Infinity;
  for (let attempt = 0; attempt < FIT_ATTEMPTS && !outcome.ok; attempt++) {
    available = Math.min(available, await coverable(services.storage.db, key, outcome));
    const fitted = fitMaxTokens(plan, available);
    if (fitted < floor || fitted >= plan.maxTokens) break;
    const fittedPlan = planInbound(req.inbound, req.body, services.catalog, services.config, { ...opts, maxTokensCap: fitted });
    const next = await tightenPromptBound(fittedPlan, affordablePromptTokens(fittedPlan, fittedPlan.maxTokens, available));
    if (next.reservationUsdc > available) break;
    plan = next;
    void reply.headers({ ...plan.responseHeaders, 'x-tollgate-max-tokens': String(plan.maxTokens), 'x-tollgate-max-tokens-fitted': String(plan.maxTokens) });
    outcome = await runChat(services.chat, req.exchange(), key, plan);
  }
  if (outcome.ok) return reply;
  reply.removeHeader('x-tollgate-max-tokens-fitted');
  const refusal = await balanceRefusal(services.storage.db, key, plan, outcome);
  refusal.message += `; the balance fit (${FIT_HEADER}) lowers max_tokens no further than ${floor}`;
  throw refusal;
}
