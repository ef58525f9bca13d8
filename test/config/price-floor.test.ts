import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { describe, test } from 'node:test';
import { loadConfig, parseConfig } from '../../src/config/load.ts';
import { toNumber } from '../../src/providers/decimal.ts';
import { pricedCatalog } from '../../src/providers/price-floor.ts';
import { PRICE_PARTS } from '../../src/providers/token-prices.ts';
import { StartupError } from '../../src/startup-error.ts';
import { runTollgate } from '../support/cli.ts';
import { tempDir } from '../support/engines.ts';

const providers = { openrouter: { baseUrl: 'https://openrouter.ai/api/v1' }, anthropic: { type: 'anthropic' } };
/** Claude through OpenRouter (an OpenAI-compatible provider), with Anthropic itself as its fallback. */
const claude = (extra: Record<string, unknown> = {}, fallback: Record<string, unknown> = {}) => ({
  providers,
  models: [
    {
      provider: 'openrouter',
      name: 'claude-sonnet',
      upstreamName: 'anthropic/claude-sonnet-4',
      contextLength: 200000,
      promptCostPer1M: '3',
      completionCostPer1M: '15',
      ...extra,
      fallbacks: [{ provider: 'anthropic', upstreamName: 'claude-sonnet-4', ...fallback }],
    },
  ],
});
const catalogOf = (raw: Record<string, unknown>) => pricedCatalog(parseConfig(raw));
const atLeast = (a: { num: bigint; den: bigint }, b: { num: bigint; den: bigint }) => a.num * b.den >= b.num * a.den;

describe('every billed part covers the dearest deployment (start-up)', () => {
  test("without listed prices, each part is billed at the dearest deployment's cost × markup: Anthropic's 1.25× cache writes included", () => {
    const model = catalogOf(claude()).models[0]!;
    assert.deepEqual(
      model.deployments.map((d) => d.id),
      ['openrouter/anthropic/claude-sonnet-4', 'anthropic/claude-sonnet-4'],
    );
    // 3 × 1.25 = 3.75 at Anthropic, × 1.2 (the default markup) = 4.5; the router's own 3 × 1.2 = 3.6 would not cover it.
    assert.equal(toNumber(model.billed.cacheWrite), 4.5);
    for (const part of PRICE_PARTS) for (const d of model.deployments) assert.ok(atLeast(model.billed[part], d.cost[part]), `${part} at ${d.id}`);
  });

  test("a listed price below a deployment's cost is refused, naming the model, the part and the deployment", () => {
    assert.throws(
      () => catalogOf(claude({ cacheWritePricePer1M: '3.6' })),
      (err: unknown) =>
        err instanceof StartupError &&
        err.message ===
          'config: models.0.cacheWritePricePer1M: openrouter/claude-sonnet bills cache writes at 3.6 USD per 1M, below the 3.75 its deployment anthropic/claude-sonnet-4 (anthropic) costs, so every request served there would lose money; set cacheWritePricePer1M to at least 3.75',
    );
    assert.throws(
      () => catalogOf(claude({ promptPricePer1M: '3.5' }, { promptCostPer1M: '4' })),
      /models\.0\.promptPricePer1M: openrouter\/claude-sonnet bills prompt tokens at 3\.5 .* below the 4 its deployment anthropic\/claude-sonnet-4/,
    );
    assert.throws(
      () => catalogOf(claude({ completionPricePer1M: '15' }, { completionCostPer1M: '16' })),
      /models\.0\.completionPricePer1M: .* completion tokens \(reasoning included\) at 15 .* below the 16/,
    );
    assert.throws(
      () => catalogOf(claude({ cacheReadPricePer1M: '0.3' }, { cacheReadCostPer1M: '0.5' })),
      /models\.0\.cacheReadPricePer1M: .* cache reads at 0\.3/,
    );
  });

  test("a listed price at or above every deployment's cost loads, and is billed as listed", () => {
    const model = catalogOf(claude({ cacheWritePricePer1M: '3.75' })).models[0]!;
    assert.equal(toNumber(model.billed.cacheWrite), 3.75);
  });

  test('a cheaper fallback does not lower the price; a dearer one raises only the parts it costs more', () => {
    const cheaper = catalogOf(claude({}, { promptCostPer1M: '1' })).models[0]!;
    assert.equal(toNumber(cheaper.billed.prompt), 3.6);
    const dearer = catalogOf(claude({}, { promptCostPer1M: '5' })).models[0]!;
    assert.deepEqual([toNumber(dearer.billed.prompt), toNumber(dearer.billed.completion)], [6, 18]);
  });

  test('the built-in catalog and tollgate.example.yaml load', () => {
    assert.ok(catalogOf({}).models.length > 0);
    const example = loadConfig({ path: fileURLToPath(new URL('../../tollgate.example.yaml', import.meta.url)), env: {} });
    assert.ok(pricedCatalog(example).models.length > 0);
  });
});

describe('tollgate serve with a model billed below a deployment cost', () => {
  test('exits 2 with one line naming the model, the part and the deployment, before opening storage', async () => {
    const dir = tempDir();
    const file = join(dir, 'below-cost.yaml');
    const database = join(dir, 'tollgate.db');
    writeFileSync(
      file,
      stringify({
        server: { host: '127.0.0.1', port: 0 },
        metrics: { port: 0 },
        database: { url: `sqlite:${database}` },
        ...claude({ cacheWritePricePer1M: '3.6' }),
      }),
    );
    const res = await runTollgate(['--config', file, 'serve']);
    assert.equal(res.code, 2, res.stderr);
    assert.match(
      res.stderr,
      /^tollgate: .*below-cost\.yaml: models\.0\.cacheWritePricePer1M: openrouter\/claude-sonnet bills cache writes at 3\.6 .* anthropic\/claude-sonnet-4 .*at least 3\.75\n$/,
    );
    assert.ok(!existsSync(database), 'no database was created');
  });
});
