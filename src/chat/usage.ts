/** Token counts as the provider reported them, or as we counted them when it reported none. */
export interface Usage {
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  cachedTokens: number;
  estimated: boolean;
}

const int = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** Reads OpenAI's usage object. Reasoning and cached tokens are parts of the totals, never added. */
export function readUsage(u: unknown): Usage | null {
  if (!u || typeof u !== 'object') return null;
  const o = u as Record<string, any>;
  if (typeof o.prompt_tokens !== 'number' && typeof o.completion_tokens !== 'number') return null;
  return {
    promptTokens: int(o.prompt_tokens),
    completionTokens: int(o.completion_tokens),
    reasoningTokens: int(o.completion_tokens_details?.reasoning_tokens),
    cachedTokens: int(o.prompt_tokens_details?.cached_tokens),
    estimated: false,
  };
}

/** The countable text of tool calls: each function's name and its arguments. */
export function toolCallsText(calls: unknown): string {
  if (!Array.isArray(calls)) return '';
  return calls.map((t) => `${t?.function?.name ?? ''}${t?.function?.arguments ?? ''}`).join('');
}

let tokenizer: Promise<(text: string) => number> | undefined;

/** Counts tokens with the o200k tokenizer, loaded only the first time an upstream omits usage. */
async function countTokens(text: string): Promise<number> {
  tokenizer ??= import('gpt-tokenizer').then((m) => (t: string) => m.countTokens(t));
  return (await tokenizer)(text);
}

/** Usage counted from the text, for an upstream that reported none; marked as estimated. */
export async function estimateUsage(promptMessages: unknown, completionText: string): Promise<Usage> {
  const promptText = (Array.isArray(promptMessages) ? promptMessages : [])
    .map((m) => {
      const c = (m as { content?: unknown })?.content;
      return typeof c === 'string' ? c : JSON.stringify(c ?? '');
    })
    .join('\n');
  const messages = Array.isArray(promptMessages) ? promptMessages.length : 0;
  return {
    // OpenAI's chat template adds about 3 tokens a message and 3 for the reply's priming.
    promptTokens: (await countTokens(promptText)) + 3 * messages + 3,
    completionTokens: completionText ? await countTokens(completionText) : 0,
    reasoningTokens: 0,
    cachedTokens: 0,
    estimated: true,
  };
}
