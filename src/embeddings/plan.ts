import type { Catalog, CatalogModel } from '../providers/catalog.ts';
import { reservationFor } from '../providers/pricing.ts';
import { resolveModel } from '../metered/plan/plan.ts';
import { badRequest } from '../refusal.ts';
import { readInputs, type EmbeddingInput } from './inputs.ts';
import { MAX_DIMENSIONS, MAX_VECTOR_VALUES } from './limits.ts';
import { nativeDimensions } from './native-dimensions.ts';

export type EncodingFormat = 'float' | 'base64';

/** Everything decided about an embeddings request before any money moves or any byte goes upstream. */
export interface EmbeddingsPlan {
  model: CatalogModel;
  /** An embeddings answer is one JSON body: nothing reaches the client before the settle. */
  stream: false;
  inputs: EmbeddingInput[];
  /**
   * How the client wants the vectors. The provider is always asked for base64 (a third of the bytes
   * of floats, and no number to parse), which is passed through or converted vector by vector.
   */
  encodingFormat: EncodingFormat;
  /** Upper bound of the prompt tokens the provider can bill for `inputs`. */
  promptUpperBound: number;
  reservationUsdc: number;
  /**
   * What is sent to the provider's /embeddings, but for `model`: the deployment that serves it
   * names its own (call.ts), so a fallback with another upstream name sends the same request.
   */
  upstreamBody: Record<string, unknown>;
}

/** OpenAI's embeddings request fields: anything else is refused, as chat refuses unknown fields. */
const FIELDS: ReadonlySet<string> = new Set(['model', 'input', 'encoding_format', 'dimensions', 'user']);
const ENCODINGS: readonly EncodingFormat[] = ['float', 'base64'];

/**
 * Tokens a provider may add to each input besides its text's (a BERT-style model's [CLS] and [SEP]),
 * counted in the bound so that it holds for such providers too.
 */
export const PER_INPUT_TOKENS = 4;

/**
 * Validates the body, resolves an embedding model and bounds what the provider can bill. A string's
 * tokens are at most its UTF-8 bytes (no token is shorter than a byte); a token array's are counted
 * exactly. Each input is capped at the model's context length, as chat's prompt bound is: providers
 * refuse a longer input (and bill nothing for the refusal).
 */
export function planEmbeddings(body: unknown, catalog: Catalog): EmbeddingsPlan {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('request body must be a JSON object with model and input');
  const b = body as Record<string, unknown>;
  const missing = ['model', 'input'].filter((k) => b[k] === undefined || b[k] === null);
  if (missing.length) throw badRequest(`${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required`, { param: missing[0]! });
  const unknown = Object.keys(b).filter((k) => !FIELDS.has(k));
  if (unknown.length) {
    const names = unknown.slice(0, 10).map((f) => f.slice(0, 100));
    throw badRequest(`Unrecognized request argument supplied: ${names.join(', ')}; an embeddings request takes ${[...FIELDS].join(', ')}`, { param: names[0] });
  }
  if (typeof b.model !== 'string' || !b.model) throw badRequest('model must be a string such as "openai/text-embedding-3-small"', { param: 'model' });
  const model = resolveModel(catalog, b.model, 'embedding');
  const inputs = readInputs(b.input);
  inputs.forEach((input, i) => {
    if (Array.isArray(input) && input.length > model.contextLength) {
      // A batch of token arrays names the one at fault; a single token array is `input` itself.
      const where = Array.isArray((b.input as unknown[])[0]) ? `input[${i}]` : 'input';
      throw badRequest(`${where} has ${input.length} tokens, above ${model.id}'s limit of ${model.contextLength} per input; split it`, { param: where });
    }
  });

  const encodingFormat = b.encoding_format ?? 'float';
  if (!ENCODINGS.includes(encodingFormat as EncodingFormat)) throw badRequest('encoding_format must be "float" or "base64"', { param: 'encoding_format' });
  const dimensions = b.dimensions;
  if (dimensions !== undefined && (typeof dimensions !== 'number' || !Number.isInteger(dimensions) || dimensions < 1)) {
    throw badRequest('dimensions must be a positive whole number, such as 256', { param: 'dimensions' });
  }
  checkAnswerSize(inputs.length, dimensions as number | undefined, model);
  if (b.user !== undefined && typeof b.user !== 'string') throw badRequest('user must be a string that identifies your end user', { param: 'user' });

  const upstreamBody: Record<string, unknown> = { input: b.input, encoding_format: 'base64' };
  if (dimensions !== undefined) upstreamBody.dimensions = dimensions;
  if (b.user !== undefined) upstreamBody.user = b.user;
  const promptUpperBound = inputs.reduce((sum, input) => sum + inputBound(input, model.contextLength), 0);
  return {
    model,
    stream: false,
    inputs,
    encodingFormat: encodingFormat as EncodingFormat,
    promptUpperBound,
    reservationUsdc: reservationFor(model, promptUpperBound, 0, 1),
    upstreamBody,
  };
}

/**
 * The answer's size, inputs × dimensions, within what one request may make the provider send
 * (limits.ts): the dimensions named, or the model's native size when none are (an ordinary OpenAI
 * request to text-embedding-3-large answers 3072 numbers an input). The bound is in numbers, not
 * in the client's encoding: the provider is always asked for base64 (plan.ts), and a float answer
 * to the client is rendered from it with yields (answer.ts).
 */
function checkAnswerSize(inputCount: number, named: number | undefined, model: CatalogModel): void {
  if (named !== undefined && named > MAX_DIMENSIONS) {
    throw badRequest(`dimensions is ${named}, above the ${MAX_DIMENSIONS} the gateway serves; ask for ${MAX_DIMENSIONS} or fewer`, { param: 'dimensions' });
  }
  const dimensions = named ?? nativeDimensions(model);
  const values = inputCount * dimensions;
  if (values <= MAX_VECTOR_VALUES) return;
  const fits = Math.floor(MAX_VECTOR_VALUES / dimensions);
  const size = named === undefined ? `${model.id}'s native ${dimensions} dimensions (no dimensions named)` : `${dimensions} dimensions`;
  const smaller = Math.floor(MAX_VECTOR_VALUES / inputCount);
  const advice = `send at most ${fits} inputs per request at this size, or a smaller dimensions (at most ${smaller} for ${inputCount} inputs)`;
  throw badRequest(`${inputCount} inputs at ${size} are ${values} numbers, above the ${MAX_VECTOR_VALUES} one answer may hold; ${advice}`, { param: 'input' });
}

function inputBound(input: EmbeddingInput, contextLength: number): number {
  const tokens = typeof input === 'string' ? Buffer.byteLength(input) : input.length;
  return Math.min(tokens + PER_INPUT_TOKENS, contextLength);
}
