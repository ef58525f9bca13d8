import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { siweProof } from '../support/siwe.ts';

/**
 * The charge in each protocol's final usage (`cost` in USD, `charged_usdc` exact), JSON
 * and streams, is what the ledger took from the wallet: the balance change, to the micro-USDC, also
 * when a capped key's charge is cut at its reservation and when a provider over-reports its usage.
 */
const FUNDS = 50_000_000;
const MAX = 60;

type Protocol = 'chat' | 'responses' | 'messages';
const PROTOCOLS: Protocol[] = ['chat', 'responses', 'messages'];
const UPSTREAMS = [
  { name: 'an OpenAI-compatible provider', model: 'fake/chat-small' },
  { name: 'an Anthropic provider', model: 'anth/claude-test' },
];

function request(protocol: Protocol, model: string, stream: boolean): { path: string; body: Record<string, unknown> } {
  if (protocol === 'chat') {
    // The usage chunk (and so the charge) reaches a streaming client that asks for it, as OpenAI's does.
    return {
      path: '/v1/chat/completions',
      body: {
        model,
        stream,
        max_tokens: MAX,
        messages: [{ role: 'user', content: 'What is a toll gate?' }],
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      },
    };
  }
  if (protocol === 'responses') return { path: '/v1/responses', body: { model, stream, max_output_tokens: MAX, input: 'What is a toll gate?', store: false } };
  return { path: '/v1/messages', body: { model, stream, max_tokens: MAX, messages: [{ role: 'user', content: 'What is a toll gate?' }] } };
}

/** Each server-sent event's JSON payload, in order. */
function events(text: string): any[] {
  return text.split('\n\n').flatMap((block) => {
    const data = block
      .split('\n')
      .find((line) => line.startsWith('data: '))
      ?.slice(6);
    return data && data !== '[DONE]' ? [JSON.parse(data)] : [];
  });
}

/** The final usage of one answer, where each protocol's clients read it. */
function finalUsage(protocol: Protocol, stream: boolean, text: string): Record<string, unknown> {
  if (!stream) return JSON.parse(text).usage;
  const all = events(text);
  if (protocol === 'chat') return all.filter((e) => e.usage).at(-1).usage;
  if (protocol === 'responses') return all.find((e) => e.type === 'response.completed' || e.type === 'response.incomplete').response.usage;
  return all.find((e) => e.type === 'message_delta').usage;
}

for (const engine of ENGINES) {
  describe(`the charge in the final usage equals the balance change (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(engine, { models: [...MODELS, CLAUDE] });
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    /** Sends one request from a fresh wallet; its final usage, its headers and what the wallet lost. */
    async function charged(protocol: Protocol, model: string, stream: boolean, opts: { funds?: number; spendLimit?: number } = {}) {
      const funds = opts.funds ?? FUNDS;
      const w = await h.wallet(funds);
      if (opts.spendLimit !== undefined) {
        const patched = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${w.keyId}`, { ...(await siweProof(w.account)), spend_limit_usdc: opts.spendLimit });
        assert.equal(patched.status, 200, patched.text);
      }
      const { path, body } = request(protocol, model, stream);
      const res = await fetch(`${h.gw.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      // A stream is settled before its final event, so the balance is final once the stream is read.
      const taken = funds - (await h.balance(w.account)).balance_usdc;
      return { usage: finalUsage(protocol, stream, text), header: res.headers.get('x-tollgate-charged-usdc'), taken, keyId: w.keyId };
    }

    const reservationOf = async (keyId: number) => {
      const rows = await h.gw.services.storage.db.selectFrom('reservations').select('amount_usdc').where('api_key_id', '=', keyId).execute();
      return Number(rows[0]!.amount_usdc);
    };

    for (const upstream of UPSTREAMS) {
      for (const protocol of PROTOCOLS) {
        for (const stream of [false, true]) {
          test(`${protocol}, ${stream ? 'streamed' : 'JSON'}, ${upstream.name}: charged_usdc is the balance change and cost the same in USD`, async () => {
            resetProviders(h);
            const { usage, header, taken } = await charged(protocol, upstream.model, stream);
            assert.ok(taken > 0);
            assert.equal(usage.charged_usdc, taken);
            assert.equal(usage.cost, taken / 1_000_000);
            assert.equal(usage.charge_deferred, undefined);
            // A JSON answer's header says the same; a stream has none (it left before the settle).
            assert.equal(header, stream ? null : String(taken));
          });
        }
      }
    }

    test('responses, streamed, an answer cut at max_output_tokens: response.incomplete carries the charge', async () => {
      resetProviders(h);
      const w = await h.wallet(FUNDS);
      const res = await fetch(`${h.gw.url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
        body: JSON.stringify({ model: 'anth/claude-test', stream: true, max_output_tokens: 16, input: 'Tell me a long story.', store: false }),
      });
      const incomplete = events(await res.text()).find((e) => e.type === 'response.incomplete');
      assert.ok(incomplete, 'the answer was cut');
      assert.equal(incomplete.response.usage.charged_usdc, FUNDS - (await h.balance(w.account)).balance_usdc);
    });

    describe('attack: a provider that over-reports its usage', () => {
      const overReport = (upstream: string) =>
        upstream.startsWith('anth/')
          ? resetProviders(h, { usage: { input_tokens: 400_000, output_tokens: 400_000 } })
          : resetProviders(h, {}, { usage: { prompt_tokens: 400_000, completion_tokens: 400_000 } });

      for (const upstream of UPSTREAMS) {
        for (const protocol of PROTOCOLS) {
          for (const stream of [false, true]) {
            const mode = `${protocol}, ${stream ? 'streamed' : 'JSON'}, ${upstream.name}`;
            test(`${mode}, a key without a limit: the usage states the whole charge the ledger took, above the reservation`, async () => {
              overReport(upstream.model);
              const { usage, taken, keyId } = await charged(protocol, upstream.model, stream);
              // 400,000 prompt tokens at 1.2 and as many output tokens at 2.4 micro-USDC each.
              assert.equal(taken, 1_440_000);
              assert.ok(taken > (await reservationOf(keyId)));
              assert.equal(usage.charged_usdc, taken);
            });

            test(`${mode}, a capped key: the charge is cut at the reservation, and the usage says so`, async () => {
              overReport(upstream.model);
              const { usage, taken, keyId } = await charged(protocol, upstream.model, stream, { spendLimit: FUNDS });
              assert.equal(taken, await reservationOf(keyId));
              assert.ok(taken < 1_440_000);
              assert.equal(usage.charged_usdc, taken);
              assert.equal(usage.cost, taken / 1_000_000);
            });

            test(`${mode}, a wallet that cannot cover the over-report: the usage states what the balance allowed`, async () => {
              overReport(upstream.model);
              const { usage, taken } = await charged(protocol, upstream.model, stream, { funds: 20_000 });
              assert.equal(taken, 20_000);
              assert.equal(usage.charged_usdc, 20_000);
            });
          }
        }
      }
    });

    describe('attack: a provider that writes a charge of its own into its usage', () => {
      for (const upstream of UPSTREAMS) {
        for (const protocol of PROTOCOLS) {
          for (const stream of [false, true]) {
            test(`${protocol}, ${stream ? 'streamed' : 'JSON'}, ${upstream.name}: its cost, charged_usdc and cost_details are replaced by the ledger's charge`, async () => {
              const lie = { usageExtra: { cost: 0, charged_usdc: 0, charge_deferred: true, cost_details: { upstream_inference_cost: 0.5 } } };
              if (upstream.model.startsWith('anth/')) resetProviders(h, lie);
              else resetProviders(h, {}, lie);
              const { usage, taken } = await charged(protocol, upstream.model, stream);
              assert.ok(taken > 0);
              assert.equal(usage.charged_usdc, taken);
              assert.equal(usage.cost, taken / 1_000_000);
              assert.equal(usage.charge_deferred, undefined);
              assert.equal(usage.cost_details, undefined);
            });
          }
        }
      }
    });
  });
}
