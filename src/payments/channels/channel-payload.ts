import { PaymentPayloadSchema } from '@x402/core/schemas';
import type { PaymentPayload } from '@x402/core/types';
import { z } from 'zod';
import { ADDRESS_PATTERN } from '../../chain/address.ts';
import { invalidPayment } from '../decode.ts';
import type { ChannelConfig } from './channel-types.ts';

/**
 * The inner payload of an x402 `batch-settlement` payment (deposit, voucher or refund), checked by
 * shape before anything else reads it: a malformed one is a 400 INVALID_PAYMENT naming the part,
 * never a 500 and never an echo of the signature.
 */

const address = z.string().regex(ADDRESS_PATTERN);
const bytes32 = z.string().regex(/^0x[0-9a-fA-F]{64}$/);
const signature = z.string().regex(/^0x[0-9a-fA-F]{2,}$/);
// uint128 in decimal; amounts the gateway holds must also be safe integers (checked where read).
const uint128 = z
  .string()
  .regex(/^\d{1,39}$/)
  .refine((v) => BigInt(v) < 2n ** 128n, 'must fit in a uint128');
const uint = z.string().regex(/^\d{1,78}$/);

const channelConfig = z.object({
  payer: address,
  payerAuthorizer: address,
  receiver: address,
  receiverAuthorizer: address,
  token: address,
  withdrawDelay: z
    .number()
    .int()
    .min(0)
    .max(2 ** 40 - 1),
  salt: bytes32,
});

const voucher = z.object({ channelId: bytes32, maxClaimableAmount: uint128, signature });

const erc3009Authorization = z.object({ validAfter: uint, validBefore: uint, salt: bytes32, signature });
const permit2Authorization = z.object({
  from: address,
  permitted: z.object({ token: address, amount: uint }),
  spender: address,
  nonce: uint,
  deadline: uint,
  witness: z.object({ channelId: bytes32 }),
  signature,
});

const deposit = z.object({
  type: z.literal('deposit'),
  channelConfig,
  voucher,
  deposit: z.object({
    amount: uint128,
    authorization: z.union([
      z.object({ erc3009Authorization, permit2Authorization: z.undefined().optional() }),
      z.object({ permit2Authorization, erc3009Authorization: z.undefined().optional() }),
    ]),
  }),
});
const voucherOnly = z.object({ type: z.literal('voucher'), channelConfig, voucher });
const refund = z.object({ type: z.literal('refund'), channelConfig, voucher, amount: uint128.optional() });

export const channelPayload = z.discriminatedUnion('type', [deposit, voucherOnly, refund]);

export type ChannelPayload = z.infer<typeof channelPayload> & { channelConfig: ChannelConfig };

/** Whether a v2 payment envelope is for the batch-settlement scheme (read before the exact/upto decoder, which knows no channel payloads). */
export function isChannelPayment(envelope: unknown): envelope is PaymentPayload {
  const e = envelope as { x402Version?: unknown; accepted?: { scheme?: unknown } } | null;
  return typeof e === 'object' && e !== null && e.x402Version === 2 && e.accepted?.scheme === 'batch-settlement';
}

/** The envelope checked by the x402 v2 schema (its `accepted` is read to find the offer), or a 400 naming what is wrong. */
export function parseChannelEnvelope(envelope: PaymentPayload): PaymentPayload {
  const parsed = PaymentPayloadSchema.safeParse(envelope);
  if (!parsed.success || parsed.data.x402Version !== 2) {
    const where = parsed.success ? 'x402Version' : parsed.error.issues[0]?.path.join('.') || 'payload';
    throw invalidPayment(`the batch-settlement payment is not an x402 v2 payload (${where} is missing or invalid)`);
  }
  return parsed.data as PaymentPayload;
}

/** The checked inner payload, or a 400 naming what is wrong. */
export function parseChannelPayload(envelope: PaymentPayload): ChannelPayload {
  const parsed = channelPayload.safeParse(envelope.payload);
  if (!parsed.success) {
    const where = parsed.error.issues[0]?.path.join('.') || 'payload';
    throw invalidPayment(`the batch-settlement payment is not a deposit, voucher or refund payload (payload.${where} is missing or invalid)`);
  }
  return parsed.data as ChannelPayload;
}

/** Decodes the base64 JSON payment header far enough to tell its scheme; undefined when it is not JSON (the exact decoder then says why). */
export function peekEnvelope(header: string): unknown {
  try {
    return JSON.parse(Buffer.from(header.trim(), 'base64').toString('utf8'));
  } catch {
    return undefined;
  }
}
