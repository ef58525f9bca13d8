import { parseJsonLoosely } from '../json.ts';
import { generatedText } from './usage-estimate.ts';
import { TextBuilder } from '../protocols/text-builder.ts';

/** Raw event text held before it is folded into plain text: a few KB per stream at most. */
const FOLD_AT_CHARS = 16 * 1024;

/**
 * The generated text of a streamed answer, kept in case the provider reports no usage and the
 * tokens have to be counted. Events are stored as they arrive (no JSON parsing per event on the
 * hot path) and folded into their text once they pass FOLD_AT_CHARS, so a long stream holds its
 * words, not every event's JSON (about 40 times larger); the words are kept flat (TextBuilder),
 * since a string grown with `+=` one delta at a time holds about five times its text.
 */
export class StreamedText {
  private events: string[] = [];
  private heldChars = 0;
  private readonly folded = new TextBuilder();

  add(data: string): void {
    this.events.push(data);
    this.heldChars += data.length;
    if (this.heldChars > FOLD_AT_CHARS) this.fold();
  }

  text(): string {
    this.fold();
    return this.folded.toString();
  }

  private fold(): void {
    for (const data of this.events) {
      const chunk = parseJsonLoosely(data); // not JSON: no text we could count
      for (const c of Array.isArray(chunk?.choices) ? chunk.choices : []) this.folded.append(generatedText(c?.delta));
    }
    this.events = [];
    this.heldChars = 0;
  }
}
