import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyRow } from '../keys/api-keys.ts';
import { reserve } from '../ledger/reservations.ts';
import { ApiError } from '../http/errors.ts';
import type { Services } from '../services.ts';
import { RequestBill, type BillOptions } from './bill.ts';
import { completeChat } from './complete.ts';
import type { ChatPlan } from './plan.ts';
import { streamChat } from './stream.ts';

/**
 * Reserves the plan's bound on the key's wallet, then runs the request and finishes its bill exactly
 * once. False, with nothing sent and nothing reserved, when the available balance cannot cover the
 * reservation: each caller words that refusal its own way (a keyed request says top up, a
 * pay-per-request one offers a payment).
 */
export async function runChat(services: Services, request: FastifyRequest, reply: FastifyReply, key: KeyRow, plan: ChatPlan, opts: BillOptions = {}): Promise<boolean> {
  const adapter = services.providers.get(plan.model.provider);
  if (!adapter) throw new ApiError(500, 'INTERNAL_ERROR', `provider ${plan.model.provider} is not configured`);

  const leaseMs = services.config.chat.reservationLeaseSeconds * 1000;
  const reserved = await reserve(services.storage, { wallet: key.wallet, apiKeyId: key.id, requestId: request.id, amountUsdc: plan.reservationUsdc, leaseMs });
  if (!reserved) return false;

  const bill = new RequestBill(services, key, plan, request.id, opts);
  try {
    if (plan.stream) await streamChat(services, reply, plan, adapter, bill);
    else await completeChat(services, reply, plan, adapter, bill);
  } finally {
    await bill.voidIfOpen('error');
  }
  return true;
}
