import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { extractDiscoveryInfo, validateDiscoveryExtension, validateDiscoveryExtensionSpec, type DiscoveryExtension } from '@x402/extensions/bazaar';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { MODELS } from '../../support/chat-harness.ts';
import { EMBEDDING_MODEL, EMBED_ID } from '../../support/embeddings-harness.ts';

const ROUTES = ['/v1/chat/completions', '/v1/responses', '/v1/messages', '/v1/embeddings'];

for (const engine of ENGINES) {
  describe(`bazaar: every pay-per-request 402 declares its route for discovery services (${engine})`, () => {
    let h: PayPerRequestHarness;
    /** What the facilitator was asked to verify, as it received it. */
    const verified: Array<{ payload: PaymentPayload; requirements: PaymentRequirements }> = [];
    before(async () => {
      h = await startPayPerRequestHarness(engine, { config: { models: [...MODELS, EMBEDDING_MODEL] } });
      const facilitator = h.gw.services.topup!.facilitator;
      const verify = facilitator.verify.bind(facilitator);
      (facilitator as { verify: typeof verify }).verify = async (payload, requirements) => {
        verified.push({ payload, requirements });
        return verify(payload, requirements);
      };
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    async function bazaarOf(
      path: string,
      body: unknown = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 },
    ): Promise<DiscoveryExtension> {
      const res = await call(
        h.gw.url,
        'POST',
        path,
        path === '/v1/responses' ? { model: 'fake/chat-small', input: 'hi' } : path === '/v1/embeddings' ? { model: EMBED_ID, input: 'hi' } : body,
      );
      assert.equal(res.status, 402, res.text);
      return decodePaymentRequiredHeader(res.headers.get('payment-required')!).extensions!.bazaar as DiscoveryExtension;
    }

    for (const path of ROUTES) {
      test(`${path}: valid by the package's own validators, POST with a JSON body whose example the gateway prices`, async () => {
        const bazaar = await bazaarOf(path);
        assert.deepEqual(validateDiscoveryExtension(bazaar), { valid: true });
        assert.equal(validateDiscoveryExtensionSpec(bazaar as unknown as Record<string, unknown>).valid, true);
        const input = bazaar.info.input as { type: string; method: string; bodyType: string; body: Record<string, unknown> };
        assert.deepEqual([input.type, input.method, input.bodyType], ['http', 'POST', 'json']);
        assert.equal((bazaar.info.output as { type: string }).type, 'json');
        // The example is a request this gateway takes: sent as it is, it is priced (402), not refused (400).
        const example = await call(h.gw.url, 'POST', path, input.body);
        assert.equal(example.status, 402, example.text);
        assert.ok(example.body.required_usdc > 0);
      });
    }

    test('the models and their prices are reachable from the listing: the schema enumerates the ids and names GET /v1/models, which prices each', async () => {
      const bazaar = await bazaarOf('/v1/chat/completions');
      const body = (bazaar.schema as any).properties.input.properties.body;
      assert.deepEqual(body.required, ['model', 'messages']);
      for (const field of ['messages', 'max_tokens', 'stream']) assert.ok(body.properties[field], field);
      const model = body.properties.model;
      assert.deepEqual(
        model.enum,
        h.gw.services.catalog.models.filter((m) => m.type === 'chat').map((m) => m.id),
        'the chat models: an embedding model is listed on /v1/embeddings',
      );
      const embeddings = await bazaarOf('/v1/embeddings');
      assert.deepEqual((embeddings.schema as any).properties.input.properties.body.properties.model.enum, [EMBED_ID]);
      const listing = model.description.match(/GET (\S+\/v1\/models)/)![1];
      assert.equal(listing, `${h.gw.config.server.publicUrl}/v1/models`);
      const models = await call(h.gw.url, 'GET', '/v1/models');
      for (const id of model.enum) {
        const entry = models.body.data.find((m: { id: string }) => m.id === id);
        assert.equal(typeof entry?.completionPricePer1M, 'number', `${id} has its price in /v1/models`);
      }
    });

    test('a paid request hands the facilitator the resource and the bazaar entry, which the package extracts as a discovered resource', async () => {
      const payer = await h.payer(10n);
      await h.openai(payer).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 50 });
      const { payload, requirements } = verified.at(-1)!;
      const found = extractDiscoveryInfo(payload, requirements, true);
      assert.ok(found);
      assert.equal(found.resourceUrl, `${h.gw.config.server.publicUrl}/v1/chat/completions`);
      assert.equal('method' in found && found.method, 'POST');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test("attack: a client that echoes a poisoned bazaar entry in its payment: the facilitator gets the gateway's own", async () => {
      const payer = await h.payer(10n);
      const poisoning: typeof fetch = async (input, init) => {
        const request = new Request(input, init);
        const header = request.headers.get('payment-signature');
        if (header) {
          const payload = JSON.parse(Buffer.from(header, 'base64').toString());
          payload.extensions = {
            bazaar: { info: { input: { type: 'http', method: 'POST', bodyType: 'json', body: { evil: true } } }, schema: { type: 'object' } },
          };
          payload.resource = { url: 'https://evil.example/steal', description: 'free tokens', mimeType: 'application/json' };
          request.headers.set('payment-signature', Buffer.from(JSON.stringify(payload)).toString('base64'));
        }
        return fetch(request);
      };
      const { x402Client, wrapFetchWithPayment } = await import('@x402/fetch');
      const { registerExactEvmScheme } = await import('@x402/evm/exact/client');
      const client = new x402Client();
      registerExactEvmScheme(client, { signer: payer });
      client.setSpendControls({
        maxAmountPerPayment: '$1',
        allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '1000000' }],
      });
      const res = await wrapFetchWithPayment(poisoning, client)(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 50 }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const { payload } = verified.at(-1)!;
      assert.equal(payload.resource?.url, `${h.gw.config.server.publicUrl}/v1/chat/completions`);
      assert.equal(JSON.stringify(payload.extensions).includes('evil'), false);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
