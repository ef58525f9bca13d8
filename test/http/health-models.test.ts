import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';

const catalog = {
  providers: {
    alpha: { baseUrl: 'http://127.0.0.1:9/v1', apiKeyEnv: 'ALPHA_KEY' },
    beta: { baseUrl: 'http://127.0.0.1:9/v1' },
  },
  models: [
    { provider: 'alpha', name: 'small', contextLength: 8192, promptCostPer1M: '0.15', completionCostPer1M: '0.6', created: 1700000000 },
    { provider: 'beta', name: 'listed', contextLength: 32000, promptCostPer1M: 1, completionCostPer1M: 2, promptPricePer1M: '1.5', completionPricePer1M: '3' },
    { provider: 'beta', name: 'free', contextLength: 4096, promptCostPer1M: '0', completionCostPer1M: '0' },
    {
      provider: 'beta',
      name: 'cached',
      contextLength: 200000,
      promptCostPer1M: '3',
      completionCostPer1M: '15',
      cachedPromptCostPer1M: '1.5',
      cacheWriteCostPer1M: '3.75',
      cacheReadCostPer1M: '0.3',
      cacheReadPricePer1M: '0.5',
    },
  ],
};

describe('GET /health and GET /v1/models', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ engine: 'sqlite', config: { ...catalog, pricing: { markupPercent: '20' } } });
  });
  after(() => gw.stop());

  test('health is ok while the database answers', async () => {
    const res = await call(gw.url, 'GET', '/health');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok', checks: { database: 'ok' } });
  });

  test('models: spec envelope and fields, billed prices with markup or the listed price', async () => {
    const res = await call(gw.url, 'GET', '/v1/models');
    assert.equal(res.status, 200);
    assert.equal(res.body.object, 'list');
    assert.deepEqual(res.body.data[0], {
      id: 'alpha/small',
      object: 'model',
      created: 1700000000,
      owned_by: 'alpha',
      name: 'small',
      provider: 'alpha',
      type: 'chat',
      contextLength: 8192,
      maxOutputTokens: 16384,
      promptPricePer1MTokens: 0.18,
      completionPricePer1M: 0.72,
      // No cache prices configured: cached parts bill at the prompt price, and are listed so.
      cachedPromptPricePer1M: 0.18,
      cacheWritePricePer1M: 0.18,
      cacheReadPricePer1M: 0.18,
    });
    const listed = res.body.data[1];
    assert.equal(listed.id, 'beta/listed');
    assert.equal(listed.promptPricePer1MTokens, 1.5, 'an explicit price is billed as listed, without markup');
    assert.equal(listed.completionPricePer1M, 3);
    assert.equal(res.body.data[2].promptPricePer1MTokens, 0);
    assert.equal(listed.cachedPromptPricePer1M, 1.5, 'a cache price defaults to the listed prompt price');
  });

  test('models: cache prices are the marked-up cache costs or their listed prices, in the list and in models/{id}', async () => {
    const list = await call(gw.url, 'GET', '/v1/models');
    const one = await call(gw.url, 'GET', '/v1/models/beta%2Fcached');
    assert.equal(one.status, 200);
    assert.deepEqual(list.body.data[3], one.body);
    const prices = (({ promptPricePer1MTokens, cachedPromptPricePer1M, cacheWritePricePer1M, cacheReadPricePer1M }) => ({
      promptPricePer1MTokens,
      cachedPromptPricePer1M,
      cacheWritePricePer1M,
      cacheReadPricePer1M,
    }))(one.body);
    assert.deepEqual(prices, { promptPricePer1MTokens: 3.6, cachedPromptPricePer1M: 1.8, cacheWritePricePer1M: 4.5, cacheReadPricePer1M: 0.5 });
  });

  test('the official openai SDK lists the models', async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused-for-models' });
    const ids: string[] = [];
    for await (const model of client.models.list()) {
      ids.push(model.id);
      assert.equal(model.object, 'model');
      assert.equal(typeof model.created, 'number');
      assert.equal(typeof model.owned_by, 'string');
    }
    assert.deepEqual(ids, ['alpha/small', 'beta/listed', 'beta/free', 'beta/cached']);
  });

  test('health is 503 degraded when the database does not answer', async () => {
    const other = await startTestGateway({ engine: 'sqlite' });
    try {
      await other.services.storage.close();
      const res = await call(other.url, 'GET', '/health');
      assert.equal(res.status, 503);
      assert.equal(res.body.status, 'degraded');
      assert.equal(res.body.checks.database, 'down');
    } finally {
      await other.stop(); // also closes its metrics listener, which would keep the test process alive
    }
  });
});

describe('listed-price mode "cost"', () => {
  test('shows provider cost instead of the billed price', async () => {
    const gw = await startTestGateway({ engine: 'sqlite', config: { ...catalog, pricing: { markupPercent: '20', listedPrices: 'cost' } } });
    try {
      const res = await call(gw.url, 'GET', '/v1/models');
      assert.equal(res.body.data[0].promptPricePer1MTokens, 0.15);
      assert.equal(res.body.data[0].completionPricePer1M, 0.6);
      assert.equal(res.body.data[1].promptPricePer1MTokens, 1);
      assert.deepEqual(
        [res.body.data[3].cachedPromptPricePer1M, res.body.data[3].cacheWritePricePer1M, res.body.data[3].cacheReadPricePer1M],
        [1.5, 3.75, 0.3],
      );
    } finally {
      await gw.stop();
    }
  });
});
