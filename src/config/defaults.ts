import type { ModelConfig, ProviderConfig } from './schema.ts';

/**
 * The catalog used when the configuration file lists no providers or models, so that
 * `npm start` on a fresh machine serves a real price list. Costs are the providers' public list
 * prices in USD per 1M tokens; chat needs the provider's API key in the named variable.
 */
export const defaultProviders: Record<string, ProviderConfig> = {
  openai: { type: 'openai-compatible', baseUrl: 'https://api.openai.com/v1', apiKeyEnv: 'OPENAI_API_KEY', maxConnections: 1024 },
};

export const defaultModels: ModelConfig[] = [
  {
    type: 'chat',
    provider: 'openai',
    name: 'gpt-4o-mini',
    contextLength: 128000,
    maxOutputTokens: 16384,
    promptCostPer1M: '0.15',
    completionCostPer1M: '0.6',
    reasoningFamily: 'none',
    created: 1721172741,
  },
  {
    type: 'chat',
    provider: 'openai',
    name: 'gpt-4.1',
    contextLength: 1047576,
    maxOutputTokens: 32768,
    promptCostPer1M: '2',
    completionCostPer1M: '8',
    reasoningFamily: 'none',
    created: 1744316542,
  },
  {
    type: 'chat',
    provider: 'openai',
    name: 'o4-mini',
    contextLength: 200000,
    maxOutputTokens: 100000,
    promptCostPer1M: '1.1',
    completionCostPer1M: '4.4',
    reasoningFamily: 'effort',
    created: 1744225351,
  },
];
