import { MAX_DIMENSIONS } from './limits.ts';

/**
 * The vector size of embedding models whose providers publish it: what a request that names no
 * `dimensions` gets back. OpenAI's three (text-embedding-3-small and -large take `dimensions`;
 * ada-002 always answers 1536).
 */
const KNOWN_DIMENSIONS: ReadonlyMap<string, number> = new Map([
  ['text-embedding-3-small', 1536],
  ['text-embedding-3-large', 3072],
  ['text-embedding-ada-002', 1536],
]);

/**
 * How long a vector the model answers when the request names no `dimensions`: the model's
 * configured `dimensions`, else the known size of its upstream name or its own name (a router's
 * `openai/text-embedding-3-large` counts as `text-embedding-3-large`), else MAX_DIMENSIONS. The
 * last is the largest size the gateway serves: a bound that holds for any model, at the price of
 * smaller batches (768 inputs) for a model nobody told the gateway about.
 */
export function nativeDimensions(m: { dimensions?: number | undefined; name: string; upstreamName?: string }): number {
  if (m.dimensions !== undefined) return m.dimensions;
  for (const name of [m.upstreamName, m.name]) {
    const known = name === undefined ? undefined : KNOWN_DIMENSIONS.get(name.slice(name.lastIndexOf('/') + 1));
    if (known !== undefined) return known;
  }
  return MAX_DIMENSIONS;
}
