import type { Dispatcher } from 'undici';
import { readBoundedAnswer } from '../providers/bounded-answer.ts';
import { MAX_ANSWER_BYTES } from './limits.ts';

/**
 * How much of a 2xx answer over MAX_ANSWER_BYTES is read on, only to find the usage at its end
 * (OpenAI writes `usage` after `data`): the provider billed that answer, so the prompt tokens it
 * reports are what the request is charged (docs/DECISIONS.md, "Embeddings answers over the cap").
 * The bytes are counted and dropped, never kept: 96 MiB holds 2048 × 3072 numbers even in floats.
 */
export const MAX_DRAINED_BYTES = 4 * MAX_ANSWER_BYTES;

/** An answer the gateway did not read whole: its size, and the prompt tokens it reported, if found. */
export interface OversizeAnswer {
  /** The bytes read (at most MAX_DRAINED_BYTES; more may have been sent). */
  bytes: number;
  promptTokens: number | null;
}

export type ReadAnswer = { text: string } | { oversize: OversizeAnswer };

/**
 * The body as text, or, past `maxBytes`, what a 2xx answer reported about itself (`drain`): the
 * rest is read and dropped, its last bytes kept, up to `maxDrained`. Without `drain` (an error
 * answer) the connection is dropped at once.
 */
export async function readAnswer(
  body: Dispatcher.ResponseData['body'],
  drain: boolean,
  maxBytes = MAX_ANSWER_BYTES,
  maxDrained = MAX_DRAINED_BYTES,
): Promise<ReadAnswer> {
  const read = await readBoundedAnswer(body, maxBytes, drain ? maxDrained : 0);
  if ('text' in read) return read;
  const { bytes, tail } = read.over;
  return { oversize: { bytes, promptTokens: tail === null ? null : promptTokensAtEnd(tail) } };
}

/** `usage.prompt_tokens` of the last `"usage"` object in the text, or null when there is none to read. */
export function promptTokensAtEnd(tail: string): number | null {
  const at = tail.lastIndexOf('"usage"');
  if (at < 0) return null;
  const found = /^"usage"\s*:\s*\{[^{}]*?"prompt_tokens"\s*:\s*(\d{1,12})\s*[,}]/.exec(tail.slice(at));
  return found ? Number(found[1]) : null;
}
