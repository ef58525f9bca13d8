import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';

const providers = {
  openai: { baseUrl: 'https://api.openai.com/v1' },
  azure: { baseUrl: 'https://example.openai.azure.com/v1' },
  claude: { type: 'anthropic', baseUrl: 'https://api.anthropic.com' },
};
const GPT = { provider: 'openai', name: 'gpt-4o-mini', contextLength: 128000, promptCostPer1M: '0.15', completionCostPer1M: '0.6' };
const model = (extra: Record<string, unknown>) => ({ providers, models: [{ ...GPT, ...extra }] });

describe('models[].tokenizer at start-up', () => {
  test('each deployment carries its own tokenizer; one left out stays at the byte bound', () => {
    const fallbacks = [
      { provider: 'azure', tokenizer: 'cl100k' },
      { provider: 'azure', upstreamName: 'other' },
    ];
    const config = parseConfig(model({ tokenizer: 'o200k', fallbacks }));
    assert.deepEqual(
      buildCatalog(config).models[0]!.deployments.map((d) => d.tokenizer),
      ['o200k', 'cl100k', undefined],
    );
  });

  test('an unknown tokenizer is refused with its path', () => {
    assert.throws(() => parseConfig(model({ tokenizer: 'llama3' })), /models\.0\.tokenizer/);
  });

  test("a tokenizer on an Anthropic deployment, the model's own or a fallback, is refused: an OpenAI count does not bound Claude's bill", () => {
    const own = model({ provider: 'claude', name: 'claude-x', tokenizer: 'o200k' });
    assert.throws(() => parseConfig(own), /models\.0\.tokenizer: "claude" is an Anthropic provider, whose tokenizer is not o200k/);
    const fallback = model({ fallbacks: [{ provider: 'claude', tokenizer: 'cl100k' }] });
    assert.throws(() => parseConfig(fallback), /models\.0\.fallbacks\.0\.tokenizer: "claude" is an Anthropic provider/);
  });
});
