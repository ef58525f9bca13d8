import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { fakeTokens } from './fake-tokens.ts';

/** What of the fake's behaviour (fake-openai.ts FakeBehaviour) the embeddings answer reads. */
export interface EmbeddingsBehaviour {
  /** A provider lying about (or simply reporting) its bill: only prompt_tokens is read. */
  usage?: { prompt_tokens: number };
  omitUsage?: boolean;
  /** A provider that writes its own bytes: rewrites the JSON answer's text before it is sent. */
  rewriteAnswer?: (json: string) => string;
  /** The model's native vector size: what a request naming no `dimensions` gets (default FAKE_EMBEDDING_DIMENSIONS). */
  nativeDimensions?: number;
}

/** The fake's vector size when a request names no `dimensions`. */
export const FAKE_EMBEDDING_DIMENSIONS = 8;

/**
 * The fake's vector for one input: the same input and size always give the same vector, of unit
 * length as OpenAI's are, with float32 values so that its float and base64 forms carry the same numbers.
 */
export function fakeEmbedding(input: string | number[], dimensions = FAKE_EMBEDDING_DIMENSIONS): number[] {
  const raw: number[] = [];
  for (let block = 0; raw.length < dimensions; block++) {
    const digest = createHash('sha256')
      .update(`${block}:${JSON.stringify(input)}`)
      .digest();
    for (let i = 0; i + 4 <= digest.length && raw.length < dimensions; i += 4) raw.push(digest.readInt32LE(i) / 2 ** 31);
  }
  const norm = Math.hypot(...raw) || 1;
  return raw.map((v) => Math.fround(v / norm));
}

/** Prompt tokens as the fake bills one input: a string at about four characters a token, a token array by its length. */
const inputTokens = (input: unknown): number => (typeof input === 'string' ? fakeTokens(input) : Array.isArray(input) ? input.length : 0);

/** OpenAI's /embeddings on the fake: vectors in the asked encoding, usage, and the window refusal. */
export function respondEmbeddings(b: EmbeddingsBehaviour, body: any, res: ServerResponse, contextLengths?: Record<string, number>): void {
  const raw = body?.input;
  const inputs: unknown[] = typeof raw === 'string' || (Array.isArray(raw) && raw.every((v) => typeof v === 'number')) ? [raw] : Array.isArray(raw) ? raw : [];
  const window = contextLengths?.[body?.model];
  const tooLong = window === undefined ? -1 : inputs.findIndex((input) => inputTokens(input) > window);
  if (inputs.length === 0 || tooLong >= 0) {
    const message =
      inputs.length === 0
        ? "'input' is a required property"
        : `This model's maximum context length is ${window} tokens, however you requested ${inputTokens(inputs[tooLong])} tokens in input[${tooLong}].`;
    res
      .writeHead(400, { 'content-type': 'application/json' })
      .end(JSON.stringify({ error: { message, type: 'invalid_request_error', param: 'input', code: null } }));
    return;
  }
  const base64 = body.encoding_format === 'base64';
  const data = inputs.map((input, index) => {
    const vector = fakeEmbedding(input as string | number[], body.dimensions ?? b.nativeDimensions);
    return { object: 'embedding', index, embedding: base64 ? toLittleEndianBase64(vector) : vector };
  });
  const promptTokens = b.usage?.prompt_tokens ?? inputs.reduce((sum: number, input) => sum + inputTokens(input), 0);
  const payload: Record<string, unknown> = { object: 'list', data, model: body.model };
  if (!b.omitUsage) payload.usage = { prompt_tokens: promptTokens, total_tokens: promptTokens };
  const text = JSON.stringify(payload);
  res.writeHead(200, { 'content-type': 'application/json' }).end(b.rewriteAnswer ? b.rewriteAnswer(text) : text);
}

function toLittleEndianBase64(vector: number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString('base64');
}
