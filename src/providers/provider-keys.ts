import type { Config } from '../config/schema.ts';

export interface MissingProviderKey {
  provider: string;
  /** The environment variable the provider's `apiKeyEnv` names, which is unset or empty. */
  variable: string;
}

/**
 * The variable a provider needs for its API key when it is unset or empty, else null. A provider
 * without `apiKeyEnv` (a local vLLM or Ollama) needs none. Calling a provider that needs a key
 * without one only earns an upstream 401 whose cause the operator cannot see, so the gateway
 * refuses such calls itself and says which variable to set.
 */
export function missingKeyVariable(config: Pick<Config, 'providers' | 'secrets'>, provider: string): string | null {
  const variable = config.providers[provider]?.apiKeyEnv;
  if (!variable) return null;
  return config.secrets.providerKeys[provider] ? null : variable;
}

/** Every provider whose key variable is unset, for the start-up summary. */
export function providersMissingKeys(config: Pick<Config, 'providers' | 'secrets'>): MissingProviderKey[] {
  return Object.keys(config.providers).flatMap((provider) => {
    const variable = missingKeyVariable(config, provider);
    return variable ? [{ provider, variable }] : [];
  });
}
