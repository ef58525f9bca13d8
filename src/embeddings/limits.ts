/**
 * What one embeddings request may make the provider send back. The inputs' own bounds (inputs.ts)
 * bound what the caller sends, but an answer is inputs × dimensions numbers: 2048 one-byte inputs
 * at 3072 dimensions are 6.3 M floats, about 84 MB of JSON for 0.0003 USD of prompt tokens. These
 * bounds keep one cheap request from holding the event loop or the heap (SECURITY.md 2.12).
 */

/**
 * The largest `dimensions` a request may name. The largest embedding models served today have 4096
 * (text-embedding-3-large has 3072); a larger number can only be a typo or an attack.
 */
export const MAX_DIMENSIONS = 4096;

/**
 * The most numbers one answer may hold, inputs × dimensions (those the request names, else the
 * model's native size: src/embeddings/native-dimensions.ts): a full batch of 2048 inputs at 1536
 * dimensions (text-embedding-3-small's own size), or 1024 at 3072. Checked before any money moves.
 */
export const MAX_VECTOR_VALUES = 2048 * 1536;

/**
 * The most bytes of a provider's answer the gateway reads: past it, the client gets a 502 and is
 * charged what the provider reported it billed (src/embeddings/oversize.ts). The gateway always
 * asks for base64 (4 bytes a number, 5.33 once encoded), so
 * MAX_VECTOR_VALUES is about 16.8 MB; this leaves room for it and for a provider that ignores
 * `encoding_format` and answers floats (about 20 bytes a number: 1.2 M numbers fit).
 */
export const MAX_ANSWER_BYTES = 24 * 1024 * 1024;
