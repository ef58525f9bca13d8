import { withCharge, type Charge } from '../protocols/charge.ts';
import { z } from 'zod';
import type { EncodingFormat } from './plan.ts';

/**
 * A provider's embeddings answer, as far as the gateway relies on it: one vector per input (floats,
 * or base64 of little-endian float32 when asked so) and the prompt tokens it bills. Everything else
 * the provider sends is dropped: the client gets OpenAI's exact shape, rebuilt.
 */
const providerAnswer = z.object({
  data: z.array(z.object({ index: z.number().int().nonnegative(), embedding: z.union([z.array(z.number()), z.string()]) })),
  model: z.string().optional(),
  usage: z.object({ prompt_tokens: z.number().int().nonnegative() }).nullish(),
});

export interface DecodedEmbeddings {
  /** The vectors in input order, as the provider sent each: floats, or OpenAI's base64. */
  vectors: (number[] | string)[];
  /** The model name the provider answered with. */
  model: string | undefined;
  /** The prompt tokens the provider reported, or null when it reported none. */
  promptTokens: number | null;
}

export type Decoded = { ok: true; value: DecodedEmbeddings } | { ok: false; problem: string };

/** The answer checked against the request: exactly one vector per input, indexes 0…n-1. */
export function decodeEmbeddings(text: string, inputCount: number): Decoded {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, problem: 'the provider sent invalid JSON' };
  }
  const parsed = providerAnswer.safeParse(json);
  if (!parsed.success) return { ok: false, problem: 'the provider sent an embeddings answer without data or with malformed vectors' };
  const vectors: (number[] | string | undefined)[] = new Array(inputCount);
  for (const item of parsed.data.data) {
    if (item.index >= inputCount || vectors[item.index]) return { ok: false, problem: `the provider answered vectors that do not match the ${inputCount} inputs` };
    vectors[item.index] = item.embedding;
  }
  if (parsed.data.data.length !== inputCount) return { ok: false, problem: `the provider answered ${parsed.data.data.length} vectors for ${inputCount} inputs` };
  return { ok: true, value: { vectors: vectors as (number[] | string)[], model: parsed.data.model, promptTokens: parsed.data.usage?.prompt_tokens ?? null } };
}

/**
 * OpenAI's answer: the vectors in the format the client asked for (passed on untouched when the
 * provider sent that format; converted through float32 when it did not, as OpenAI's base64 is
 * float32), and the prompt tokens billed.
 */
export function encodeEmbeddings(decoded: DecodedEmbeddings, format: EncodingFormat, modelName: string, promptTokens: number, charge?: Charge) {
  return {
    object: 'list' as const,
    data: decoded.vectors.map((v, index) => ({ object: 'embedding' as const, index, embedding: inFormat(v, format) })),
    model: decoded.model ?? modelName,
    // The charge rides on the usage as on every protocol's (src/protocols/charge.ts).
    usage: withCharge({ prompt_tokens: promptTokens, total_tokens: promptTokens }, charge),
  };
}

function inFormat(vector: number[] | string, format: EncodingFormat): number[] | string {
  if (format === 'base64') return typeof vector === 'string' ? vector : toBase64(Float32Array.from(vector));
  return typeof vector === 'string' ? Array.from(fromBase64(vector)) : vector;
}

/** OpenAI's base64 vectors: the float32 values, little-endian, back to back. */
export function toBase64(vector: Float32Array): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString('base64');
}

export function fromBase64(text: string): Float32Array {
  const bytes = Buffer.from(text, 'base64');
  const out = new Float32Array(Math.floor(bytes.length / 4));
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}
