import { tokenizerOf, type TokenizerFamily } from './families.ts';

/**
 * The longest piece (one match of the family's split pattern) encoded by BPE; a longer one counts
 * as its UTF-8 bytes. BPE's time grows with the square of a piece's length (a 96 KiB run of one
 * letter took seconds), and no token is shorter than a byte, so bytes are a true count for it.
 */
export const MAX_ENCODED_PIECE = 128;
/** Text longer than this is not tokenized at all: its bound stays at bytes (the CPU a request may cost). */
export const MAX_TOKENIZED_CHARS = 1 << 18;
/** Characters of whole pieces handed to the tokenizer at once. */
const SEGMENT_CHARS = 256;
/** The longest the work runs before it lets the event loop serve others. */
const SLICE_MS = 5;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * An upper bound on the tokens `family` encodes `text` into, or null when `text` is longer than
 * MAX_TOKENIZED_CHARS or the count passes `stopAbove` (what the wallet could pay for: counting on
 * would only spend CPU for a 402). BPE encodes each piece of the split pattern apart, so the text is handed over
 * in segments that start and end on piece boundaries (the count of each is the sum of its pieces'),
 * one more token per segment for the pattern's end-of-text rules; each piece past
 * MAX_ENCODED_PIECE counts as its bytes. The work yields every SLICE_MS, so no text, whatever it
 * holds, keeps the event loop for long.
 */
export async function boundedTokenCount(text: string, family: TokenizerFamily, stopAbove = Infinity): Promise<number | null> {
  if (text.length > MAX_TOKENIZED_CHARS || stopAbove < 0) return null;
  const tokenizer = await tokenizerOf(family);
  const split = tokenizer.splitter();
  let total = 0;
  let segmentStart = 0;
  let covered = 0;
  let sliceStart = performance.now();
  const flush = (end: number) => {
    if (end > segmentStart) total += tokenizer.count(text.slice(segmentStart, end)) + 1;
    segmentStart = end;
  };
  for (let m = split.exec(text); m !== null; m = split.exec(text)) {
    const end = m.index + m[0].length;
    // What the pattern skipped (it matches every character, but a bound must not rely on it).
    if (m.index > covered) {
      flush(covered);
      total += Buffer.byteLength(text.slice(covered, m.index));
      segmentStart = m.index;
    }
    covered = end;
    if (m[0].length > MAX_ENCODED_PIECE) {
      flush(m.index);
      total += Buffer.byteLength(m[0]);
      segmentStart = end;
    } else if (end - segmentStart >= SEGMENT_CHARS) {
      flush(end);
    }
    if (m[0].length === 0) split.lastIndex++;
    if (total > stopAbove) return null;
    if (performance.now() - sliceStart > SLICE_MS) {
      await yieldToLoop();
      sliceStart = performance.now();
    }
  }
  flush(covered);
  if (covered < text.length) total += Buffer.byteLength(text.slice(covered));
  return total;
}
