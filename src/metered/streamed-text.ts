import { parseJsonLoosely } from '../json.ts';
import { generatedText } from './usage-estimate.ts';
import { TextBuilder } from '../protocols/text-builder.ts';

/** Raw event text held before it is folded into plain text: a few KB per stream at most. */
const FOLD_AT_CHARS = 16 * 1024;

/**
 * The generated text of a streamed answer, kept in case the provider reports no usage and the
 * tokens have to be counted. An event its decoder already parsed (the OpenAI-compatible upstream
 * parses each one, to know it is JSON) gives its words at once, so a held stream keeps its words, not
 * its events' JSON (about 40 times larger: some 4 KB a held stream of a dozen events). Other events are
 * stored as they arrive (no JSON parsing on the hot path for this alone) and folded into their text
 * once they pass FOLD_AT_CHARS. The words are kept flat (TextBuilder), since a string grown with `+=`
 * one delta at a time holds about five times its text.
 */
export class StreamedText {
  private events: string[] = [];
  private heldChars = 0;
  private readonly folded = new TextBuilder();

  /** One event; `parsed`: the same event already parsed by its decoder, whose words are then kept at once. */
  add(data: string, parsed?: unknown): void {
    if (parsed !== undefined) {
      if (this.events.length) this.fold(); // events held before it come first in the text
      this.appendWords(parsed);
      return;
    }
    this.events.push(data);
    this.heldChars += data.length;
    if (this.heldChars > FOLD_AT_CHARS) this.fold();
  }

  text(): string {
    this.fold();
    return this.folded.toString();
  }

  private fold(): void {
    for (const data of this.events) this.appendWords(parseJsonLoosely(data)); // not JSON: no text we could count
    this.events = [];
    this.heldChars = 0;
  }

  private appendWords(chunk: any): void {
    for (const c of Array.isArray(chunk?.choices) ? chunk.choices : []) this.folded.append(generatedText(c?.delta));
  }
}
