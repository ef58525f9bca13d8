import type { ProviderConfig } from '../config/schema.ts';
import type { AdapterTimeouts, ProviderAdapter } from './adapter.ts';
import { anthropicProvider } from './anthropic/adapter.ts';
import { anthropicUpstream } from '../protocols/anthropic-messages/upstream.ts';
import { openAICompatible } from './openai-compatible.ts';
import { openAIChatUpstream } from '../protocols/openai-chat/upstream.ts';
import type { UpstreamTranslator } from '../protocols/upstream.ts';

export type ProviderType = ProviderConfig['type'];

/**
 * Every provider type: its upstream translator (used by the chat plan to encode and bound the request) and how
 * to connect to one configured provider of that type. Adding a provider type is a config schema
 * entry, an upstream translator (src/protocols/), a connect function and one line here.
 */
const PROVIDER_TYPES: {
  [T in ProviderType]: {
    upstream: UpstreamTranslator;
    connect(name: string, config: Extract<ProviderConfig, { type: T }>, apiKey: string | undefined, timeouts: AdapterTimeouts): ProviderAdapter;
  };
} = {
  'openai-compatible': { upstream: openAIChatUpstream, connect: (name, c, key, t) => openAICompatible(name, c, key, t, c.maxConnections) },
  anthropic: { upstream: anthropicUpstream, connect: (name, c, key, t) => anthropicProvider(name, c, key, t, c.maxConnections) },
};

export function upstreamOf(type: ProviderType): UpstreamTranslator {
  return PROVIDER_TYPES[type].upstream;
}

export function connectProvider(name: string, config: ProviderConfig, apiKey: string | undefined, timeouts: AdapterTimeouts): ProviderAdapter {
  // The map's type ties each connect function to its own config type; TypeScript cannot follow the
  // correlation through a union key, hence the cast.
  const type = PROVIDER_TYPES[config.type] as {
    connect(name: string, config: ProviderConfig, apiKey: string | undefined, timeouts: AdapterTimeouts): ProviderAdapter;
  };
  return type.connect(name, config, apiKey, timeouts);
}
