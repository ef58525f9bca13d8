import type { AdapterTimeouts, ProviderAdapter } from '../adapter.ts';
import { postingAdapter } from '../posting-adapter.ts';
import { anthropicHeaders } from './headers.ts';
import { anthropicUpstream } from '../../protocols/anthropic-messages/upstream.ts';

export interface AnthropicProviderConfig {
  baseUrl: string;
  anthropicVersion: string;
  anthropicBeta: readonly string[];
}

/** Anthropic's Messages API: POST {baseUrl}/v1/messages with x-api-key and anthropic-version. */
export function anthropicProvider(
  name: string,
  config: AnthropicProviderConfig,
  apiKey: string | undefined,
  timeouts: AdapterTimeouts,
  connections: number,
): ProviderAdapter {
  const headers = anthropicHeaders({ apiKey, version: config.anthropicVersion, beta: config.anthropicBeta });
  // Anthropic has no documented caller request id; a custom header is ignored and harmless.
  return postingAdapter({
    name,
    upstream: anthropicUpstream,
    baseUrl: config.baseUrl,
    endpoint: '/v1/messages',
    headers,
    requestIdHeader: 'x-tollgate-request-id',
    timeouts,
    connections,
  });
}
