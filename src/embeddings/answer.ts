import { withCharge, type Charge } from '../protocols/charge.ts';
import type { EncodingFormat } from './plan.ts';

/**
 * A provider's embeddings answer, as far as the gateway relies on it: one vector per input (base64
 * of little-endian float32, as the gateway asks for, or floats from a provider that ignores
 * `encoding_format`) and the prompt tokens it bills. Everything else the provider sends is dropped:
 * the client gets OpenAI's exact shape, rebuilt.
 *
 * Checked by hand rather than with zod: an answer holds up to millions of numbers (limits.ts), and a
 * schema walking each of them held the event loop for seconds (SECURITY.md 2.12).
 */
export interface DecodedEmbeddings {
  /** The vectors in input order, as the provider sent each: floats, or OpenAI's base64. */
  vectors: (number[] | string)[];
  /** The model name the provider answered with. */
  model: string | undefined;
  /** The prompt tokens the provider reported, or null when it reported none. */
  promptTokens: number | null;
}

export type Decoded = { ok: true; value: DecodedEmbeddings } | { ok: false; problem: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** The answer checked against the request: exactly one non-empty vector per input, indexes 0…n-1. */
export function decodeEmbeddings(text: string, inputCount: number): Decoded {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, problem: 'the provider sent invalid JSON' };
  }
  const malformed: Decoded = { ok: false, problem: 'the provider sent an embeddings answer without data or with malformed vectors' };
  if (!isObject(json) || !Array.isArray(json.data) || (json.model !== undefined && typeof json.model !== 'string')) return malformed;
  const usage = json.usage;
  if (usage !== undefined && usage !== null && (!isObject(usage) || !isCount(usage.prompt_tokens))) return malformed;
  if (json.data.length !== inputCount) return { ok: false, problem: `the provider answered ${json.data.length} vectors for ${inputCount} inputs` };
  const vectors: (number[] | string | undefined)[] = new Array(inputCount);
  for (const item of json.data as unknown[]) {
    if (!isObject(item) || !isCount(item.index) || !isVector(item.embedding)) return malformed;
    // `!== undefined`, not truthiness: an empty first vector must still count as the index taken.
    if (item.index >= inputCount || vectors[item.index] !== undefined)
      return { ok: false, problem: `the provider answered vectors that do not match the ${inputCount} inputs` };
    vectors[item.index] = item.embedding;
  }
  return {
    ok: true,
    value: {
      vectors: vectors as (number[] | string)[],
      model: json.model as string | undefined,
      promptTokens: isObject(usage) ? (usage.prompt_tokens as number) : null,
    },
  };
}

/**
 * A non-empty vector: base64 of whole float32 values, or finite numbers. The base64 characters are
 * not checked one by one (a regular expression over a 16 MB answer took 190 ms of event loop): a
 * client asking base64 decodes exactly the bytes the provider sent, and one asking floats gets
 * what Buffer's decoder makes of them.
 */
function isVector(v: unknown): v is number[] | string {
  if (typeof v === 'string') return v.length > 0 && v.length % 4 === 0 && Buffer.byteLength(v, 'base64') % 4 === 0;
  if (!Array.isArray(v) || v.length === 0) return false;
  for (const n of v) if (typeof n !== 'number' || !Number.isFinite(n)) return false;
  return true;
}

/** Numbers converted between yields: a few milliseconds of work, so other requests are served between. */
const VALUES_PER_TURN = 16_384;

/**
 * OpenAI's answer as UTF-8 JSON: the vectors in the format the client asked for (passed on untouched
 * when the provider sent that format; converted through float32 when it did not, as OpenAI's base64
 * is float32), and the prompt tokens billed. Written vector by vector into Buffers, yielding to the
 * event loop every VALUES_PER_TURN converted numbers, so that a large answer in floats does not
 * stall other requests (joined as one string, 65 MB took another 250 ms to encode on the way out).
 */
export async function renderEmbeddings(
  decoded: DecodedEmbeddings,
  format: EncodingFormat,
  modelName: string,
  promptTokens: number,
  charge?: Charge,
): Promise<Buffer> {
  const parts: Buffer[] = [Buffer.from('{"object":"list","data":[')];
  let sinceYield = 0;
  for (const [index, vector] of decoded.vectors.entries()) {
    const item = `${index ? ',' : ''}{"object":"embedding","index":${index},"embedding":${JSON.stringify(inFormat(vector, format))}}`;
    parts.push(Buffer.from(item));
    if (typeof vector === 'string' && format === 'base64') continue;
    sinceYield += vector.length;
    if (sinceYield >= VALUES_PER_TURN) {
      sinceYield = 0;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  // The charge rides on the usage as on every protocol's (src/protocols/charge.ts).
  const usage = withCharge({ prompt_tokens: promptTokens, total_tokens: promptTokens }, charge);
  parts.push(Buffer.from(`],"model":${JSON.stringify(decoded.model ?? modelName)},"usage":${JSON.stringify(usage)}}`));
  return Buffer.concat(parts);
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
