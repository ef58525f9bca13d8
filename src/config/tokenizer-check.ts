import type { ModelConfig, ProviderConfig } from './schema.ts';

type Deployments = Pick<ModelConfig, 'provider' | 'fallbacks'> & { tokenizer?: string };

/**
 * A tokenizer named on a deployment of an Anthropic provider, as the rest of a config error's path,
 * or null. Claude's tokenizer is not one of OpenAI's, so an OpenAI count would not bound its bill:
 * the setting is refused at start-up rather than reserving too little.
 */
export function claudeTokenizerProblem(m: Deployments, providers: Record<string, ProviderConfig>): string | null {
  const named = [{ path: 'tokenizer', provider: m.provider, tokenizer: m.tokenizer }];
  for (const [j, f] of (m.fallbacks ?? []).entries()) named.push({ path: `fallbacks.${j}.tokenizer`, provider: f.provider, tokenizer: f.tokenizer });
  const wrong = named.find((d) => d.tokenizer !== undefined && providers[d.provider]?.type === 'anthropic');
  if (!wrong) return null;
  return (
    `${wrong.path}: "${wrong.provider}" is an Anthropic provider, whose tokenizer is not ${wrong.tokenizer}; ` +
    "leave tokenizer out (Claude's prompts are bounded by their bytes)"
  );
}
