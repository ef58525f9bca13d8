import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planChat } from '../../src/metered/plan/plan.ts';
import { parseConfig } from '../../src/config/load.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';

const config = parseConfig(
  {
    providers: { anth: { type: 'anthropic' } },
    models: [
      {
        provider: 'anth',
        name: 'claude',
        contextLength: 10_000_000,
        maxOutputTokens: 1000,
        promptCostPer1M: '1',
        completionCostPer1M: '1',
        inputs: ['text', 'file'],
        partTokenBounds: { file: 10 },
      },
    ],
  },
  {},
);
const catalog = buildCatalog(config);

/**
 * A key holder shapes a part that is large in OpenAI's form and small once translated for
 * Anthropic (a PDF part's `filename` is dropped): if the bound subtracted the part at its OpenAI
 * size, the text sent beside it would escape the reservation.
 */
test('the prompt bound covers every byte of text sent to Anthropic, whatever the client-side size of its parts', () => {
  const text = 'x'.repeat(200_000);
  const pdf = { type: 'file', file: { filename: 'f'.repeat(500_000), file_data: 'data:application/pdf;base64,JVBERi0=' } };
  const plan = planChat({ model: 'anth/claude', max_tokens: 10, messages: [{ role: 'user', content: [pdf, { type: 'text', text }] }] }, catalog, config);
  assert.ok(!plan.upstreamBytes.toString().includes('fffff'), 'the filename is not sent');
  assert.ok(plan.promptUpperBound >= text.length, `bound ${plan.promptUpperBound} covers the ${text.length} text bytes sent`);
});
