import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { createSIWxPayload, encodeSIWxHeader, type SIWxExtension } from '@x402/extensions/sign-in-with-x';
import OpenAI from 'openai';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { freePort } from '../../../src/devchain/ports.ts';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { createKeyProof } from '../../support/siwe.ts';
import { siwxPayingOpenai } from '../../support/siwx-paying-client.ts';
import { settledUpto, uptoOpenAI, uptoPayer } from '../../support/upto-pay-per-request.ts';

/**
 * Stored responses (src/stored-responses/) against payers without an API key: an exact or upto
 * payment, or a sign-in-with-x proof, on each request. A payment is no durable owner, so a paid
 * request stores nothing (whatever `store` says) and its references (`previous_response_id`,
 * `item_reference`) are a 400 before any offer: no payer, the wallet that stored the response
 * included, reads, continues or deletes a response, or fills a wallet's storage bounds, and no
 * stored history is expanded into a prompt priced before its expansion.
 */
const ASK = { model: 'fake/chat-small', input: 'hello', max_output_tokens: 100 };
/** The Response's `store` (openai-node's type leaves it out). */
const storeOf = (response: unknown) => (response as { store?: boolean } | undefined)?.store;

for (const engine of ENGINES) {
  describe(`attack: stored responses and payers without an API key (${engine})`, () => {
    let h: PayPerRequestHarness;
    let origin: string;
    before(async () => {
      const port = await freePort();
      origin = `http://127.0.0.1:${port}`;
      h = await startPayPerRequestHarness(engine, {
        config: {
          server: { port, publicUrl: origin },
          payPerRequest: { enabled: true, upto: true },
          // One response per wallet: a paid request that took the place would show at once.
          responses: { store: { maxStoredPerWallet: 1 } },
        },
      });
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    const db = () => h.gw.services.storage.db;
    const stored = () => db().selectFrom('stored_responses').select(['id', 'wallet', 'api_key_id']).execute();
    const paymentsOf = (a: FundedAccount) => db().selectFrom('payments').select('id').where('payer', '=', a.address.toLowerCase()).execute();
    const keyed = (key: string) => new OpenAI({ baseURL: `${origin}/v1`, apiKey: key, maxRetries: 0 });
    async function keyFor(a: FundedAccount): Promise<string> {
      const res = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(a, { domain: new URL(origin).host, uri: origin }));
      assert.equal(res.status, 201, res.text);
      return res.body.key as string;
    }
    /** A wallet with a key and the change of one paid request as its balance. */
    async function walletWithKey(): Promise<{ account: FundedAccount; key: string }> {
      const account = await h.payer(10n);
      await h.openai(account).responses.create({ ...ASK, store: false });
      assert.ok((await h.balance(account.address)) > 0);
      return { account, key: await keyFor(account) };
    }
    /** A sign-in-with-x header the stock helpers build for a fresh /v1/responses 402. */
    async function siwxHeader(a: FundedAccount): Promise<string> {
      const res = await fetch(`${origin}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ASK) });
      assert.equal(res.status, 402);
      const required = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
      const ext = required.extensions!['sign-in-with-x'] as SIWxExtension;
      return encodeSIWxHeader(await createSIWxPayload({ ...ext.info, chainId: required.accepts[0]!.network, type: 'eip191' }, a, `${origin}/v1/responses`));
    }

    test('paid requests (exact, upto, sign-in-with-x; JSON and streamed) store nothing, so they neither own a response nor fill the wallet bounds', async () => {
      const { account, key } = await walletWithKey();
      const upto = await uptoPayer(h);
      const clients: Array<[string, OpenAI]> = [
        ['exact', h.openai(account)],
        ['sign-in-with-x', await siwxPayingOpenai(h, origin, account)],
        ['upto', uptoOpenAI(h, upto)],
      ];
      // One upto payment of a payer at a time: the next waits for the last one's settle.
      const settled = (name: string) => (name === 'upto' ? settledUpto(h, upto) : undefined);
      for (const [name, sdk] of clients) {
        const answer = await sdk.responses.create({ ...ASK, store: true });
        assert.equal(storeOf(answer), false, `${name}: a paid answer says it was not stored`);
        await settled(name);
        const stream = await sdk.responses.create({ ...ASK, store: true, stream: true });
        let completed: unknown;
        for await (const event of stream) if (event.type === 'response.completed') completed = event.response;
        await settled(name);
        assert.equal(storeOf(completed), false, `${name}: a paid stream's final Response says it was not stored`);
        for (const id of [answer.id]) {
          const read = await call(h.gw.url, 'GET', `/v1/responses/${id}`, undefined, { authorization: `Bearer ${key}` });
          assert.equal(read.status, 404, `${name}: not even the payer wallet's own key finds it`);
        }
      }
      assert.deepEqual(await stored(), [], 'nothing was stored for a payer');
      // maxStoredPerWallet is 1: the wallet's key still has its place.
      const own = await keyed(key).responses.create(ASK).withResponse();
      assert.equal(own.response.headers.get('x-tollgate-store'), 'stored');
      assert.equal(storeOf(own.data), true);
      await assertLedgerConsistent(db());
    });

    test('a response stored by a key is out of reach of every payer: previous_response_id and item_reference are a 400 before any offer, GET and DELETE a 401', async () => {
      const owner = await walletWithKey();
      const first = await keyed(owner.key).responses.create({ ...ASK, input: 'remember: the secret is 42' });
      assert.equal(storeOf(first), true);
      const item = first.output.find((o) => o.type === 'message')!.id;
      const other = await h.payer(10n);
      const calls = h.fake.received.length;
      const before = { owner: (await paymentsOf(owner.account)).length, other: (await paymentsOf(other)).length };
      const references = [
        { ...ASK, previous_response_id: first.id },
        {
          ...ASK,
          input: [
            { type: 'item_reference' as const, id: item },
            { role: 'user' as const, content: 'what was the secret?' },
          ],
        },
      ];
      // The stock paying clients (the wallet that stored it, and another), a payer's upto client,
      // and a sign-in-with-x proof of the owner wallet: each is refused before any 402, so nothing
      // is signed, paid or run.
      const paying: Array<[string, OpenAI]> = [
        ['the owner wallet paying', h.openai(owner.account)],
        ['another payer', h.openai(other)],
        ['an upto payer', uptoOpenAI(h, await uptoPayer(h))],
      ];
      for (const body of references) {
        for (const [name, sdk] of paying) {
          await assert.rejects(sdk.responses.create(body), (err: unknown) => {
            assert.ok(err instanceof OpenAI.BadRequestError, `${name}: ${String(err)}`);
            return true;
          });
        }
        // Which 400 (the SDK keeps only the code): the reference itself, refused by name.
        const raw = await call(h.gw.url, 'POST', '/v1/responses', body);
        assert.equal(raw.status, 400);
        assert.match(raw.body.message, /kept only for requests made with an API key/);
        const proof = await fetch(`${origin}/v1/responses`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'sign-in-with-x': await siwxHeader(owner.account) },
          body: JSON.stringify(body),
        });
        assert.equal(proof.status, 400, 'the owner wallet signing in with x');
      }
      for (const method of ['GET', 'DELETE']) {
        const credentials: Record<string, string>[] = [
          {},
          { 'sign-in-with-x': await siwxHeader(owner.account) },
          { 'payment-signature': 'eyJ4NDAyVmVyc2lvbiI6Mn0=' },
        ];
        for (const headers of credentials) {
          const res = await call(h.gw.url, method, `/v1/responses/${first.id}`, undefined, headers);
          assert.equal(res.status, 401, `${method} with ${Object.keys(headers).join(',') || 'nothing'}: ${res.text}`);
        }
      }
      assert.equal(h.fake.received.length, calls, 'no referring request reached the provider');
      assert.deepEqual({ owner: (await paymentsOf(owner.account)).length, other: (await paymentsOf(other)).length }, before, 'no payment was taken');
      // Still the key's, whole.
      const kept = await keyed(owner.key).responses.retrieve(first.id);
      assert.equal(kept.id, first.id);
      const continued = await keyed(owner.key).responses.create({ ...ASK, previous_response_id: first.id, input: 'and now?' });
      assert.match(continued.output_text, /fake provider/);
      assert.match(JSON.stringify(h.fake.received.at(-1)!.body), /the secret is 42/, 'the key continues its own conversation');
      await assertLedgerConsistent(db());
    });
  });
}
