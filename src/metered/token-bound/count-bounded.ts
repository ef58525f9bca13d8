import { runInLane, type LaneJob } from '../../cpu-lane.ts';
import { tokenizerOf, type Tokenizer, type TokenizerFamily } from './families.ts';

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
/**
 * An upper bound on the tokens `family` encodes `text` into, or null when `text` is longer than
 * MAX_TOKENIZED_CHARS or the count passes `stopAbove` (what the wallet could pay for: counting on
 * would only spend CPU for a 402). BPE encodes each piece of the split pattern apart, so the text is handed over
 * in segments that start and end on piece boundaries (the count of each is the sum of its pieces'),
 * one more token per segment for the pattern's end-of-text rules; each piece past
 * MAX_ENCODED_PIECE counts as its bytes. The work runs in the shared CPU lane (src/cpu-lane.ts), a
 * slice per turn, so no text, whatever it holds, keeps the event loop for long, and many counts at
 * once take turns with every other lane job instead of each yielding on its own.
 */
export async function boundedTokenCount(text: string, family: TokenizerFamily, stopAbove = Infinity): Promise<number | null> {
  if (text.length > MAX_TOKENIZED_CHARS || stopAbove < 0) return null;
  const job = new BoundedCount(text, await tokenizerOf(family), stopAbove);
  await runInLane(job);
  return job.result;
}

/** The count as a lane job: its position in the text is kept between slices. */
class BoundedCount implements LaneJob {
  result: number | null = null;
  private readonly split: RegExp;
  private total = 0;
  private segmentStart = 0;
  private covered = 0;

  constructor(
    private readonly text: string,
    private readonly tokenizer: Tokenizer,
    private readonly stopAbove: number,
  ) {
    this.split = tokenizer.splitter();
  }

  advance(deadline: number): boolean {
    const { text, split } = this;
    for (let m = split.exec(text); m !== null; m = split.exec(text)) {
      const end = m.index + m[0].length;
      // What the pattern skipped (it matches every character, but a bound must not rely on it).
      if (m.index > this.covered) {
        this.flush(this.covered);
        this.total += Buffer.byteLength(text.slice(this.covered, m.index));
        this.segmentStart = m.index;
      }
      this.covered = end;
      if (m[0].length > MAX_ENCODED_PIECE) {
        this.flush(m.index);
        this.total += Buffer.byteLength(m[0]);
        this.segmentStart = end;
      } else if (end - this.segmentStart >= SEGMENT_CHARS) {
        this.flush(end);
      }
      if (m[0].length === 0) split.lastIndex++;
      if (this.total > this.stopAbove) return true;
      if (performance.now() > deadline) return false;
    }
    this.flush(this.covered);
    if (this.covered < text.length) this.total += Buffer.byteLength(text.slice(this.covered));
    this.result = this.total;
    return true;
  }

  private flush(end: number): void {
    if (end > this.segmentStart) this.total += this.tokenizer.count(this.text.slice(this.segmentStart, end)) + 1;
    this.segmentStart = end;
  }
}
