import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';

const providers = {
  openai: { baseUrl: 'https://api.openai.com/v1' },
  azure: { baseUrl: 'https://example.openai.azure.com/v1' },
  claude: { type: 'anthropic', baseUrl: 'https://api.anthropic.com' },
};
const model = (fallbacks: unknown[], extra: Record<string, unknown> = {}) => ({
  providers,
  models: [{ provider: 'openai', name: 'gpt-4o-mini', contextLength: 128000, promptCostPer1M: '0.15', completionCostPer1M: '0.6', fallbacks, ...extra }],
});

describe('models[].fallbacks at start-up', () => {
  test('a fallback naming an unknown provider is refused, naming the configured ones', () => {
    assert.throws(
      () => parseConfig(model([{ provider: 'azrue' }])),
      /models\.0\.fallbacks\.0\.provider: "azrue" is not one of the configured providers \(openai, azure, claude\)/,
    );
  });

  test('a fallback repeating the model itself, or another fallback, is refused', () => {
    assert.throws(() => parseConfig(model([{ provider: 'openai' }])), /models\.0\.fallbacks\.0: the deployment openai\/gpt-4o-mini repeats the model itself/);
    assert.throws(
      () => parseConfig(model([{ provider: 'azure' }, { provider: 'azure', upstreamName: 'gpt-4o-mini' }])),
      /fallbacks\.1: the deployment azure\/gpt-4o-mini repeats fallbacks\.0/,
    );
  });

  test('the same provider under another upstream name is another deployment', () => {
    const config = parseConfig(model([{ provider: 'openai', upstreamName: 'gpt-4o-mini-2024-07-18' }]));
    assert.deepEqual(
      buildCatalog(config).models[0]!.deployments.map((d) => d.id),
      ['openai/gpt-4o-mini', 'openai/gpt-4o-mini-2024-07-18'],
    );
  });

  test('bad fields and weights are refused with their path', () => {
    assert.throws(() => parseConfig(model([{ provider: 'azure', weight: 0 }])), /models\.0\.fallbacks\.0\.weight/);
    assert.throws(() => parseConfig(model([{ provider: 'azure', promptPricePer1M: '1' }])), /models\.0\.fallbacks\.0/);
    assert.throws(() => parseConfig(model([{ provider: 'azure', promptCostPer1M: 'cheap' }])), /models\.0\.fallbacks\.0\.promptCostPer1M/);
    assert.throws(() => parseConfig({ ...model([]), chat: { retries: 9 } }), /chat\.retries/);
  });

  test("a fallback's costs default to the model's; the billed price is the model's whatever serves; another type encodes its own way", () => {
    const catalog = buildCatalog(
      parseConfig(
        model([
          { provider: 'azure', promptCostPer1M: '0.165' },
          { provider: 'claude', upstreamName: 'claude-haiku' },
        ]),
      ),
    );
    const [own, azure, claude] = catalog.models[0]!.deployments;
    assert.deepEqual(azure!.cost.prompt, { num: 165n, den: 1000n });
    assert.deepEqual(azure!.cost.completion, { num: 6n, den: 10n });
    assert.deepEqual(azure!.cost.completion, own!.cost.completion);
    assert.equal(claude!.upstream, 'anthropic');
    assert.equal(claude!.id, 'claude/claude-haiku');
  });
});
