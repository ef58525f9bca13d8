/**
 * The tokenizers whose counts the prompt bound may use instead of bytes: OpenAI's published ones,
 * as gpt-tokenizer implements them. An operator names one per deployment (`models[].tokenizer`,
 * `fallbacks[].tokenizer`) when the provider bills with it; without one, the bound stays at bytes.
 * Anthropic has none here: Claude's tokenizer is not public, so no count of ours is a proven bound
 * on its bill, and its worst case, one token per byte, is what the byte bound already reserves.
 */
export { TOKENIZER_FAMILIES, type TokenizerFamily } from '../../config/schema.ts';
import type { TokenizerFamily } from '../../config/schema.ts';

/** One family's pre-tokenizer (the regex that cuts text into the pieces BPE encodes apart) and its counter. */
export interface Tokenizer {
  /** A fresh copy of the family's split pattern (global, unicode): each caller owns its lastIndex. */
  splitter(): RegExp;
  /** Tokens of `text` as plain text: strings such as "<|endoftext|>" count as the characters they are. */
  count(text: string): number;
}

const loaded = new Map<TokenizerFamily, Promise<Tokenizer>>();

/** The family's tokenizer, loaded the first time it is needed (its rank table is megabytes). */
export function tokenizerOf(family: TokenizerFamily): Promise<Tokenizer> {
  let tokenizer = loaded.get(family);
  if (!tokenizer) {
    tokenizer = load(family);
    loaded.set(family, tokenizer);
  }
  return tokenizer;
}

async function load(family: TokenizerFamily): Promise<Tokenizer> {
  const patterns = await import('gpt-tokenizer/esm/encodingParams/constants');
  const encoding = family === 'o200k' ? await import('gpt-tokenizer/encoding/o200k_base') : await import('gpt-tokenizer/encoding/cl100k_base');
  const pattern = family === 'o200k' ? patterns.O200K_TOKEN_SPLIT_REGEX : patterns.CL100K_TOKEN_SPLIT_REGEX;
  // A provider encodes the text a client sends as text, special-token look-alikes included.
  const plain = { disallowedSpecial: new Set<string>() };
  return {
    splitter: () => new RegExp(pattern.source, pattern.flags),
    count: (text) => encoding.countTokens(text, plain),
  };
}
