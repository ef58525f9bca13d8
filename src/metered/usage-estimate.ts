import type { InternalMessage, Usage } from '../protocols/internal.ts';
import type { ChatPlan } from './plan/plan.ts';
import { CONTROL_FIELDS } from '../protocols/openai-chat/request-fields.ts';
import { runInLane } from '../cpu-lane.ts';

/** A string field as text; anything else (a client's `{"toString": 1}` among them) reads as nothing. */
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The countable text of tool calls: each function's name and its arguments. */
function toolCallsText(calls: unknown): string {
  if (!Array.isArray(calls)) return '';
  return calls.map((t) => `${str(t?.function?.name)}${str(t?.function?.arguments)}`).join('');
}

/**
 * The generated text of one choice's message (or stream delta), everything the provider bills as
 * completion tokens and the client receives: the answer, a refusal, the reasoning some providers
 * send beside it (`reasoning_content` from DeepSeek and vLLM, `reasoning` from OpenRouter), and
 * tool or function calls.
 */
export function generatedText(m: unknown): string {
  const o = (m ?? {}) as InternalMessage;
  // Prompt messages may carry content as an array of text (or refusal) parts; deltas never do.
  const content = Array.isArray(o.content)
    ? o.content.map((p: { text?: unknown; refusal?: unknown } | null) => str(p?.text) || str(p?.refusal)).join('')
    : str(o.content);
  const call = o.function_call ? `${str(o.function_call.name)}${str(o.function_call.arguments)}` : '';
  return `${str(o.reasoning_content)}${str(o.reasoning)}${content}${str(o.refusal)}${toolCallsText(o.tool_calls)}${call}`;
}

let tokenizer: Promise<(text: string) => number> | undefined;

/**
 * The longest run of whitespace, or of anything else, the tokenizer is given in one piece. o200k's
 * BPE (gpt-tokenizer) takes time quadratic in the length of one pre-tokenized piece, which is a run
 * of letters, digits, punctuation or whitespace: 96 KiB of "a" took 11 s of synchronous time, 1 MiB
 * would take minutes, and every other request on the instance would wait. No real word or
 * indentation is near this long.
 */
export const MAX_TOKENIZED_RUN = 200;

/**
 * About the most text the tokenizer is given in one call (a piece ends at the next run of
 * whitespace past it): a few milliseconds of work at worst, so the CPU lane can stop between
 * two pieces close to its slice's end.
 */
export const PIECE_CHARS = 1024;

/** Text at most this long is counted at once, without waiting for the lane: well under a millisecond. */
const COUNTED_AT_ONCE = 2048;

/** UTF-16 whitespace as the tokenizer's `\s` sees it (JavaScript's `\s`), without a regular expression per character. */
function isSpace(c: number): boolean {
  if (c <= 127) return c === 32 || (c >= 9 && c <= 13);
  return (
    c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff
  );
}

/**
 * `text` in pieces, cut wherever a run of whitespace, or of non-whitespace, passes
 * MAX_TOKENIZED_RUN characters (never between the two halves of a surrogate pair), and where a run
 * of whitespace starts once a piece holds PIECE_CHARS characters (o200k gives a word its leading
 * space, so a cut before the space changes no token). One linear pass, done as the pieces are taken.
 */
export function* textPieces(text: string): Generator<string> {
  let start = 0;
  let run = 0;
  let space = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const s = isSpace(c);
    if (s !== space) {
      space = s;
      run = 0;
      if (s && i - start >= PIECE_CHARS) {
        yield text.slice(start, i);
        start = i;
      }
    }
    if (++run > MAX_TOKENIZED_RUN && !(c >= 0xdc00 && c <= 0xdfff)) {
      yield text.slice(start, i);
      start = i;
      run = 1;
    }
  }
  yield text.slice(start);
}

/** textPieces as a list. */
export function boundedPieces(text: string): string[] {
  return [...textPieces(text)];
}

/**
 * Counts tokens with the o200k tokenizer (loaded the first time it is needed), the one count every
 * use of the tokenizer goes through: POST /v1/messages/count_tokens, the usage estimate for an
 * upstream that reported none (over client and provider text alike) and embeddings' usage estimate.
 * Each piece of textPieces is counted apart, so the time is linear in the text's length whatever it
 * holds, and a long text is counted in the shared CPU lane (src/cpu-lane.ts), a few
 * milliseconds at a time, so no text holds the event loop. A cut inside a run can only end a token
 * early, so the count may come out slightly high, never meaningfully low: the safe side for every
 * use (a client compacting its context early; an estimate billed within the reservation's bound,
 * which caps it).
 */
export async function countTokens(text: string): Promise<number> {
  tokenizer ??= import('gpt-tokenizer').then((m) => (t: string) => m.countTokens(t));
  const count = await tokenizer;
  let total = 0;
  const pieces = textPieces(text);
  const job = {
    advance(deadline: number) {
      do {
        const next = pieces.next();
        if (next.done) return true;
        if (next.value) total += count(next.value);
      } while (performance.now() < deadline);
      return false;
    },
  };
  if (text.length <= COUNTED_AT_ONCE) job.advance(Infinity);
  else await runInLane(job);
  return total;
}

/** What the estimate reads from the plan: the body as sent and the bounds it was reserved at. */
export type EstimateInput = Pick<ChatPlan, 'upstreamBody' | 'parts' | 'promptUpperBound' | 'maxTokens' | 'n'>;

/** The text a provider renders into the prompt from one message: its name and its text as generated. */
function messageText(m: unknown): string {
  const name = (m as { name?: unknown } | null)?.name;
  return `${typeof name === 'string' ? name : ''}${generatedText(m)}`;
}

/**
 * Usage counted with the tokenizer, for an upstream that reported none or a drain that was cut;
 * marked as estimated. It counts every input the reservation bounded: the messages' text, each
 * other input field (tools, functions, response_format, tool_choice, provider extensions) as its
 * JSON, and each declared non-text part at its bound. Each side is capped at what was reserved for
 * it: the provider accepted the prompt (so it fits that bound) and stops each choice at max_tokens.
 */
export async function estimateUsage(plan: EstimateInput, completionText: string): Promise<Usage> {
  const body = plan.upstreamBody;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const inputs = Object.entries(body)
    .filter(([field]) => field !== 'messages' && !CONTROL_FIELDS.has(field))
    .map(([, value]) => JSON.stringify(value));
  const promptText = [...messages.map(messageText), ...inputs].join('\n');
  // OpenAI's chat template adds about 3 tokens a message and 3 for the reply's priming.
  const promptTokens = (await countTokens(promptText)) + 3 * messages.length + 3 + plan.parts.tokens;
  const completionTokens = completionText ? await countTokens(completionText) : 0;
  return {
    input: { total: Math.min(promptTokens, plan.promptUpperBound), cacheRead: 0, cacheWrite: 0 },
    output: { total: Math.min(completionTokens, plan.n * plan.maxTokens), reasoning: 0 },
    estimated: true,
  };
}

/**
 * The usage a delivered answer is billed at: the provider's report, unless it made none, or reports
 * no output beside text it delivered (a proxy with counting off, or a lie: any text is a token at
 * least, and a zero settled the answer for its prompt alone). Then the output is counted from the
 * text, and the prompt side is kept as reported (`reported`, else `promptReported`: Anthropic's
 * `message_start`) when it was, and was not 0. `text` is read only when needed (a stream folds its events for it).
 */
export async function billedUsage(plan: EstimateInput, reported: Usage | null, text: () => string, promptReported: Usage | null = null): Promise<Usage> {
  if (reported && reported.output.total > 0) return reported;
  const delivered = text();
  if (reported && delivered === '') return reported;
  const estimate = await estimateUsage(plan, delivered);
  // A prompt reported as 0 tokens is no count either (a request has a prompt): the estimate's stands.
  const promptSide = [reported, promptReported].find((u) => u && u.input.total > 0);
  return promptSide ? { ...estimate, input: promptSide.input } : estimate;
}
