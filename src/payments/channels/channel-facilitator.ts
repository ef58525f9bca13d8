import type { PaymentPayload, PaymentRequirements, SettleResponse } from '@x402/core/types';
import { z } from 'zod';
import type { Facilitator } from '../facilitator/facilitator.ts';
import type { ChannelSnapshot } from './channel-types.ts';

/**
 * What the request path asks the facilitator about a channel, and the channel snapshot it reads
 * from the answers (the spec: every /verify answer's `extra`, every /settle answer's
 * `extra.channelState`). A snapshot that is missing or not in the spec's shape is a refusal, never
 * a guess: the server must not take a channel's totalClaimed from anywhere but the facilitator.
 */

const amount = z
  .string()
  .regex(/^\d{1,16}$/)
  .transform(Number)
  .refine(Number.isSafeInteger);
const snapshotSchema = z.object({
  channelId: z.string().regex(/^0x[0-9a-fA-F]{64}$/),
  balance: amount,
  totalClaimed: amount,
  withdrawRequestedAt: z.coerce.number().int().min(0),
  refundNonce: z.coerce.string().regex(/^\d{1,78}$/),
});

/** The snapshot in `extra` for `channelId`, or null. */
export function snapshotIn(extra: unknown, channelId: string): ChannelSnapshot | null {
  const parsed = snapshotSchema.safeParse(extra);
  if (!parsed.success || parsed.data.channelId.toLowerCase() !== channelId.toLowerCase()) return null;
  return { ...parsed.data, channelId: parsed.data.channelId.toLowerCase() as `0x${string}` };
}

export type ChannelVerdict = { ok: true; snapshot: ChannelSnapshot } | { ok: false; reason: string };

/** The facilitator's /verify of a deposit, voucher or refund payload; throws FacilitatorUnavailable when it does not answer. */
export async function verifyWithFacilitator(
  facilitator: Facilitator,
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  channelId: string,
): Promise<ChannelVerdict> {
  const verified = await facilitator.verify(payload, requirements);
  if (!verified.isValid) return { ok: false, reason: verified.invalidReason ?? 'rejected by the facilitator' };
  const snapshot = snapshotIn(verified.extra, channelId);
  if (!snapshot) return { ok: false, reason: "the facilitator's verify answer carries no channel state" };
  return { ok: true, snapshot };
}

export type ChannelSettled = { ok: true; transaction: string; amount: string; snapshot: ChannelSnapshot } | { ok: false; reason: string };

/** The facilitator's /settle of a deposit or an enriched refund: its transaction and the channel's state after it. */
export async function settleWithFacilitator(
  facilitator: Facilitator,
  payload: PaymentPayload,
  requirements: PaymentRequirements,
  channelId: string,
): Promise<ChannelSettled> {
  const settled: SettleResponse = await facilitator.settle(payload, requirements);
  if (!settled.success) return { ok: false, reason: settled.errorReason ?? 'the facilitator did not settle it' };
  const snapshot = snapshotIn((settled.extra as { channelState?: unknown } | undefined)?.channelState, channelId);
  if (!snapshot) return { ok: false, reason: "the facilitator's settle answer carries no channel state" };
  return { ok: true, transaction: settled.transaction, amount: settled.amount ?? '', snapshot };
}
