import type { ModelConfig, ProviderConfig } from './schema.ts';

/**
 * A tokenizer named on a deployment of an Anthropic provider, as the rest of a config error's path,
 * or null. Claude's tokenizer is not one of OpenAI's, so an OpenAI count would not bound its bill:
 * the setting is refused at start-up rather than reserving too little.
 */
export function claudeTokenizerProblem(m: Pick<ModelConfig, 'provider' | 'fallbacks'> & { tokenizer?: string }, providers: Record<string, ProviderConfig>): string | null {
  const own = m.tokenizer !== undefined && providers[m.provider]?.type === 'anthropic';
  if (own) return `tokenizer: "${m.provider}" is an Anthropic provider, whose tokenizer is not ${m.tokenizer}; leave tokenizer out (Claude's prompts are bounded by their bytes)`;
  for (const [j, f] of (m.fallbacks ?? []).entries()) {
    if (f.tokenizer !== undefined && providers[f.provider]?.type === 'anthropic') {
      return `fallbacks.${j}.tokenizer: "${f.provider}" is an Anthropic provider, whose tokenizer is not ${f.tokenizer}; leave tokenizer out (Claude's prompts are bounded by their bytes)`;
    }
  }
  return null;
}
