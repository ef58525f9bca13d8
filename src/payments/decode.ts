import { PaymentPayloadSchema } from '@x402/core/schemas';
import type { PaymentPayload } from '@x402/core/types';
import { z } from 'zod';
import { ADDRESS_PATTERN } from '../chain/address.ts';
import { ApiError } from '../refusal.ts';

/**
 * Decoding of the paid request's header (`X-Payment` or `PAYMENT-SIGNATURE`): standard base64 of
 * JSON, an x402 v1 or v2 payload by the @x402/core schemas, whose inner `payload` is an exact-scheme
 * EIP-3009 or Permit2 authorization, or an upto-scheme Permit2 one (its witness names a facilitator).
 * Anything else is a 400 INVALID_PAYMENT that says which part is
 * wrong and never echoes the header (it carries a signature).
 */
export const invalidPayment = (message: string) => new ApiError(400, 'INVALID_PAYMENT', message);

const address = z.string().regex(ADDRESS_PATTERN);
// A uint256, in decimal: anything larger cannot be signed or settled, and is refused here as a 400
// rather than failing later inside the facilitator or the chain client.
const UINT256_LIMIT = 2n ** 256n;
const uint = z
  .string()
  .regex(/^\d{1,78}$/)
  .refine((v) => BigInt(v) < UINT256_LIMIT, 'must fit in a uint256');
const signature = z.string().regex(/^0x[0-9a-fA-F]{2,}$/);

export const eip3009Payload = z.object({
  signature,
  authorization: z.object({
    from: address,
    to: address,
    value: uint,
    validAfter: uint,
    validBefore: uint,
    nonce: z.string().regex(/^0x[0-9a-fA-F]{64}$/),
  }),
});

export const permit2Payload = z.object({
  signature,
  permit2Authorization: z.object({
    from: address,
    permitted: z.object({ token: address, amount: uint }),
    spender: address,
    nonce: uint,
    deadline: uint,
    // `facilitator`: the upto scheme's witness also binds who may settle (scheme_upto_evm.md); kept,
    // or the facilitator would be handed a payload whose signature no longer matches.
    witness: z.object({ to: address, validAfter: uint, facilitator: address.optional() }),
  }),
});

export type Eip3009Payload = z.infer<typeof eip3009Payload>;
export type Permit2Payload = z.infer<typeof permit2Payload>;

export type DecodedPayment =
  | { envelope: PaymentPayload | V1Envelope; kind: 'eip3009'; inner: Eip3009Payload }
  | { envelope: PaymentPayload | V1Envelope; kind: 'permit2'; inner: Permit2Payload };

export interface V1Envelope {
  x402Version: 1;
  scheme: string;
  network: string;
  payload: Record<string, unknown>;
}

export function decodePaymentHeader(header: string): DecodedPayment {
  const text = header.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) throw invalidPayment('the payment header is not base64; send the x402 payment payload as base64 JSON');
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(text, 'base64').toString('utf8'));
  } catch {
    throw invalidPayment('the payment header is base64 but not JSON; send the x402 payment payload as base64 JSON');
  }
  const parsed = PaymentPayloadSchema.safeParse(json);
  if (!parsed.success) {
    const where = parsed.error.issues[0]?.path.join('.') || 'payload';
    throw invalidPayment(`the payment is not an x402 v1 or v2 payload (${where} is missing or invalid)`);
  }
  const envelope = parsed.data as PaymentPayload | V1Envelope;
  const eip3009 = eip3009Payload.safeParse(envelope.payload);
  if (eip3009.success) return { envelope, kind: 'eip3009', inner: eip3009.data };
  const permit2 = permit2Payload.safeParse(envelope.payload);
  if (permit2.success) return { envelope, kind: 'permit2', inner: permit2.data };
  throw invalidPayment('the payment payload is neither an EIP-3009 authorization nor a Permit2 authorization of the exact or upto scheme');
}

/** The token amount the payer signed, in the asset's smallest unit. */
export function signedAmountAtomic(decoded: DecodedPayment): bigint {
  return BigInt(decoded.kind === 'eip3009' ? decoded.inner.authorization.value : decoded.inner.permit2Authorization.permitted.amount);
}
