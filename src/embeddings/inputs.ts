import { badRequest } from '../refusal.ts';

/** OpenAI's own limit on the inputs of one embeddings request. */
export const MAX_INPUTS = 2048;
/**
 * The most UTF-8 bytes one string input may have: far beyond any embedding model's window at any
 * real text's bytes per token (8191 tokens of English are about 32 KiB), so only inputs no provider
 * could take are refused here; the whole body is bounded by limits.chatBodyBytes before this.
 */
export const MAX_STRING_BYTES = 1024 * 1024;
/** Token ids are non-negative 32-bit integers: every tokenizer's vocabulary fits, as does every provider's parser. */
export const MAX_TOKEN_ID = 2 ** 31 - 1;

/** One input as sent: a string, or the token ids of one text. */
export type EmbeddingInput = string | number[];

const SHAPES = 'a string, an array of strings, an array of token ids, or an array of token-id arrays';

/**
 * The inputs of `input` as a list, each checked: OpenAI's four shapes (a string, strings, one token
 * array, token arrays), exactly one level of nesting, no empty input, every token id a whole number
 * in range, at most MAX_INPUTS inputs and MAX_STRING_BYTES per string. Each refusal is a 400 naming
 * the input at fault and what to send instead.
 */
export function readInputs(input: unknown): EmbeddingInput[] {
  if (typeof input === 'string') return [checkString(input, 'input')];
  if (!Array.isArray(input)) throw badRequest(`input must be ${SHAPES}`, { param: 'input' });
  if (input.length === 0) throw badRequest('input is an empty array; send at least one string or token array', { param: 'input' });
  // One array of numbers is one tokenised input, not a batch of numbers.
  if (input.every((v) => typeof v === 'number')) return [checkTokens(input as number[], 'input')];
  if (input.length > MAX_INPUTS)
    throw badRequest(`input has ${input.length} items; send at most ${MAX_INPUTS} per request and split the rest into more requests`, { param: 'input' });
  const strings = typeof input[0] === 'string';
  return input.map((item, i) => {
    const where = `input[${i}]`;
    if (strings && typeof item === 'string') return checkString(item, where);
    if (!strings && Array.isArray(item)) return checkTokens(item, where);
    const expected = strings ? 'a string like the first item' : 'an array of token ids like the first item';
    throw badRequest(`${where} must be ${expected}: input is ${SHAPES}, not a mix`, { param: where });
  });
}

function checkString(text: string, where: string): string {
  if (text.length === 0) throw badRequest(`${where} is an empty string; every input must have some text`, { param: where });
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_STRING_BYTES)
    throw badRequest(`${where} is ${bytes} bytes, above the ${MAX_STRING_BYTES} a string input may have; split it into shorter inputs`, { param: where });
  return text;
}

function checkTokens(tokens: unknown[], where: string): number[] {
  if (tokens.length === 0) throw badRequest(`${where} is an empty token array; every input must have at least one token id`, { param: where });
  tokens.forEach((id, j) => {
    if (Array.isArray(id)) throw badRequest(`${where}[${j}] is an array: token arrays nest one level only (an array of token-id arrays)`, { param: where });
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > MAX_TOKEN_ID) {
      throw badRequest(`${where}[${j}] must be a token id, a whole number from 0 to ${MAX_TOKEN_ID}`, { param: where });
    }
  });
  return tokens as number[];
}
