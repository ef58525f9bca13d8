import assert from 'node:assert/strict';
import { before, beforeEach, describe, test } from 'node:test';
import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { z } from 'zod';
import { CLAUDE, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { until } from '../support/until.ts';
import { agentSuite, CHARGE_PER_CALL, FINAL_TEXT, FUNDS, toolRoundTrip } from './agent-run.ts';

/**
 * The OpenAI Agents SDK (@openai/agents 0.20.0) with its defaults: the Responses API, an agent with a
 * function tool that the SDK runs between two model calls, non-streamed and streamed, on an
 * OpenAI-compatible model and an Anthropic one, each call billed exactly. Only the client (the
 * gateway's URL and key, an openai-node client given to the SDK's own OpenAIProvider; one per wallet
 * here, where a program would call setDefaultOpenAIClient once) is set; tracing is turned off
 * because it would post traces to OpenAI.
 */

describe('OpenAI Agents SDK (run, with a function tool) against /v1/responses', () => {
  const suite = agentSuite(toolRoundTrip('weather', { city: 'Paris' }));
  let h: AnthropicHarness;
  const calls: string[] = [];
  const dropped: (string | null)[] = [];
  const weather = tool({
    name: 'weather',
    description: 'The weather in a city now',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `sunny in ${city}`;
    },
  });

  before(() => {
    h = suite.harness();
    setTracingDisabled(true);
  });
  beforeEach(() => {
    calls.length = 0;
    dropped.length = 0;
  });

  async function agentFor(model: string) {
    const w = await h.wallet(FUNDS);
    // The answers' x-tollgate-fields-dropped, to see what of its requests the gateway did not pass on.
    const seeDropped: typeof fetch = async (url, init) => {
      const res = await fetch(url, init);
      dropped.push(res.headers.get('x-tollgate-fields-dropped'));
      return res;
    };
    const runner = new Runner({
      modelProvider: new OpenAIProvider({ openAIClient: new OpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: w.key, fetch: seeDropped }) }),
    });
    return { w, runner, agent: new Agent({ name: 'Weather', instructions: 'Answer with the weather tool.', model, tools: [weather] }) };
  }

  async function expectBilled(w: { account: any; keyId: number }, model: string) {
    const usage = () =>
      h.gw.services.storage.db.selectFrom('request_usage').select(['model', 'charged_usdc']).where('api_key_id', '=', w.keyId).orderBy('id').execute();
    // A stream's bill is written just after its last event.
    await until(async () => (await usage()).length === 2, 'both calls billed');
    const rows = await usage();
    assert.deepEqual(
      rows.map((r) => ({ model: r.model, charged: Number(r.charged_usdc) })),
      [1, 2].map(() => ({ model, charged: CHARGE_PER_CALL })),
    );
    const balance = await h.balance(w.account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: FUNDS - 2 * CHARGE_PER_CALL, locked: 0 });
    assert.deepEqual(dropped, [null, null], 'the gateway passed on everything it sent');
  }

  for (const model of ['fake/chat-small', `anth/${CLAUDE.name}`]) {
    test(`${model}: run() calls the tool and answers; both calls billed exactly`, async () => {
      const { w, agent, runner } = await agentFor(model);
      const result = await runner.run(agent, 'What is the weather in Paris?');
      assert.equal(result.finalOutput, FINAL_TEXT);
      assert.deepEqual(calls, ['Paris']);
      await expectBilled(w, model);
    });

    test(`${model}: run() streamed; both calls billed exactly`, async () => {
      const { w, agent, runner } = await agentFor(model);
      const result = await runner.run(agent, 'What is the weather in Paris?', { stream: true });
      let text = '';
      for await (const chunk of result.toTextStream()) text += chunk;
      await result.completed;
      assert.equal(text, FINAL_TEXT);
      assert.deepEqual(calls, ['Paris']);
      await expectBilled(w, model);
    });
  }
});
