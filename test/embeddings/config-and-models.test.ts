import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { parseConfig } from '../../src/config/load.ts';
import type { ChatHarness } from '../support/chat-harness.ts';
import { EMBED_ID, startEmbeddingsHarness } from '../support/embeddings-harness.ts';

describe('embedding models in the configuration', () => {
  const providers = { p: { baseUrl: 'http://127.0.0.1:1/v1' }, claude: { type: 'anthropic' } };
  const embedding = { provider: 'p', name: 'e', type: 'embedding', contextLength: 8191, promptCostPer1M: '0.02' };

  test('type defaults to chat; an embedding model needs no completion cost', () => {
    const config = parseConfig({
      providers,
      models: [embedding, { provider: 'p', name: 'c', contextLength: 10, promptCostPer1M: '1', completionCostPer1M: '2' }],
    });
    assert.deepEqual(
      config.models.map((m) => [m.name, m.type]),
      [
        ['e', 'embedding'],
        ['c', 'chat'],
      ],
    );
  });

  test('refused at start-up: an embedding model on an anthropic provider, a completion price on one, a chat model without one', () => {
    assert.throws(
      () => parseConfig({ providers, models: [{ ...embedding, provider: 'claude' }] }),
      /models\.0\.type: "claude" is an anthropic provider, which serves no embeddings; put an embedding model on an openai-compatible provider/,
    );
    assert.throws(
      () => parseConfig({ providers, models: [{ ...embedding, completionCostPer1M: '0.5' }] }),
      /completionCostPer1M.*an embedding model produces no completion tokens; leave it out/s,
    );
    assert.throws(
      () => parseConfig({ providers, models: [{ ...embedding, completionPricePer1M: '1' }] }),
      /completionPricePer1M.*an embedding model produces no completion tokens/s,
    );
    assert.doesNotThrow(() => parseConfig({ providers, models: [{ ...embedding, completionCostPer1M: '0' }] }));
    assert.throws(
      () => parseConfig({ providers, models: [{ provider: 'p', name: 'c', contextLength: 10, promptCostPer1M: '1' }] }),
      /completionCostPer1M.*is required for a chat model/s,
    );
    assert.throws(() => parseConfig({ providers, models: [{ ...embedding, type: 'rerank' }] }), /type/);
  });
});

describe('GET /v1/models lists each model with its type; an embedding model at its prompt price, completion 0', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startEmbeddingsHarness('sqlite');
  });
  after(() => h.stop());

  test('through the openai SDK', async () => {
    const client = new OpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const listed = (await client.models.list()).data as any[];
    const embed = listed.find((m) => m.id === EMBED_ID);
    assert.equal(embed.type, 'embedding');
    assert.equal(embed.promptPricePer1MTokens, 12, '10 USD cost + 20% markup');
    assert.equal(embed.completionPricePer1M, 0);
    assert.equal(listed.find((m) => m.id === 'fake/chat-small').type, 'chat');
    assert.deepEqual(await client.models.retrieve(EMBED_ID), embed);
  });
});
