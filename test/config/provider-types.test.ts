import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';

const model = (provider: string) => ({ provider, name: 'm', contextLength: 1000, promptCostPer1M: '1', completionCostPer1M: '1' });

test("provider type anthropic: Anthropic's URL, key variable, API version and no betas by default", () => {
  const config = parseConfig({ providers: { claude: { type: 'anthropic' } }, models: [model('claude')] }, { ANTHROPIC_API_KEY: 'sk-ant-x' });
  const p = config.providers.claude!;
  assert.equal(p.type, 'anthropic');
  assert.deepEqual(
    { baseUrl: p.baseUrl, apiKeyEnv: p.apiKeyEnv, version: p.type === 'anthropic' && p.anthropicVersion, beta: p.type === 'anthropic' && p.anthropicBeta },
    { baseUrl: 'https://api.anthropic.com', apiKeyEnv: 'ANTHROPIC_API_KEY', version: '2023-06-01', beta: [] },
  );
  assert.equal(config.secrets.providerKeys.claude, 'sk-ant-x');
});

test("a provider without type is OpenAI-compatible, and Anthropic's settings are refused on it", () => {
  const config = parseConfig({ providers: { local: { baseUrl: 'http://127.0.0.1:8000/v1' } }, models: [model('local')] }, {});
  assert.equal(config.providers.local!.type, 'openai-compatible');
  assert.throws(
    () => parseConfig({ providers: { local: { baseUrl: 'http://127.0.0.1:8000/v1', anthropicVersion: '2023-06-01' } }, models: [model('local')] }, {}),
    /anthropicVersion/,
  );
});
