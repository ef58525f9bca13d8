import type { ModelConfig, ProviderConfig } from './schema.ts';
import { claudeTokenizerProblem } from './tokenizer-check.ts';

/**
 * What is wrong with a model's deployments (the model itself and its `fallbacks`), as the rest of a
 * config error's path (`fallbacks.1.provider: …`), or null. Checked at start-up so a typo is a
 * refusal to start, not a fallback that silently never serves.
 */
export function deploymentProblem(
  m: Pick<ModelConfig, 'provider' | 'name' | 'upstreamName' | 'fallbacks' | 'type' | 'tokenizer'>,
  providers: Record<string, ProviderConfig>,
): string | null {
  const tokenizerProblem = claudeTokenizerProblem(m, providers);
  if (tokenizerProblem) return tokenizerProblem;
  const seen = new Map<string, string>([[`${m.provider}/${m.upstreamName ?? m.name}`, 'the model itself']]);
  for (const [j, f] of (m.fallbacks ?? []).entries()) {
    if (!providers[f.provider]) {
      return `fallbacks.${j}.provider: "${f.provider}" is not one of the configured providers (${Object.keys(providers).join(', ') || 'none'}); add it under providers or fix the name`;
    }
    // Embeddings are forwarded to an OpenAI-style /embeddings, which no other provider type has.
    if (m.type === 'embedding' && providers[f.provider]!.type !== 'openai-compatible') {
      return `fallbacks.${j}.provider: "${f.provider}" is an ${providers[f.provider]!.type} provider, which serves no embeddings; an embedding model's fallbacks must be openai-compatible providers`;
    }
    const id = `${f.provider}/${f.upstreamName ?? m.upstreamName ?? m.name}`;
    const before = seen.get(id);
    if (before) return `fallbacks.${j}: the deployment ${id} repeats ${before}; a fallback must name another provider or another upstreamName`;
    seen.set(id, `fallbacks.${j}`);
  }
  return null;
}
