import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { createSIWxPayload, encodeSIWxHeader, wrapFetchWithSIWx, type CompleteSIWxInfo, type SIWxExtension } from '@x402/extensions/sign-in-with-x';
import OpenAI from 'openai';
import { randomBytes } from 'node:crypto';
import { USDC_DOMAIN } from '../../../src/devchain/deploy.ts';
import { USD } from '../../support/topup-harness.ts';
import { signEip3009, v2Header } from '../../support/x402-payloads.ts';
import { freePort } from '../../../src/devchain/ports.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { siwxChallenge } from '../../../src/siwe/siwx.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { MODELS } from '../../support/chat-harness.ts';
import { mergeConfig, startTestGateway } from '../../support/gateway.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { siwxPayingOpenai } from '../../support/siwx-paying-client.ts';

const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

for (const engine of ENGINES) {
  describe(`sign-in-with-x: a keyless request spends the wallet's balance with the stock @x402/extensions client (${engine})`, () => {
    let h: PayPerRequestHarness;
    let origin: string;
    before(async () => {
      // The stock client signs only a challenge whose domain is the host it talked to, so the
      // gateway announces the URL the tests reach it at.
      const port = await freePort();
      origin = `http://127.0.0.1:${port}`;
      h = await startPayPerRequestHarness(engine, { config: { server: { port, publicUrl: origin } } });
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    const url = () => `${origin}/v1/chat/completions`;
    const post = (headers: Record<string, string> = {}, body: unknown = BODY) =>
      fetch(url(), { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const siwxOpenai = (account: FundedAccount, inner: typeof fetch = fetch) =>
      new OpenAI({
        baseURL: `${origin}/v1`,
        apiKey: 'unused',
        defaultHeaders: { Authorization: null },
        fetch: wrapFetchWithSIWx(inner, account) as typeof fetch,
        maxRetries: 0,
      });

    /** The sign-in-with-x challenge of a fresh 402. */
    async function challenge(body: unknown = BODY): Promise<{ ext: SIWxExtension; network: string }> {
      const res = await post({}, body);
      assert.equal(res.status, 402);
      const required = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
      return { ext: required.extensions!['sign-in-with-x'] as SIWxExtension, network: required.accepts[0]!.network };
    }
    /** What the stock client would send for a challenge, built with its own helpers. */
    async function signed(account: FundedAccount, over: Partial<CompleteSIWxInfo> = {}, requestUrl = url()): Promise<string> {
      const { ext, network } = await challenge();
      return encodeSIWxHeader(await createSIWxPayload({ ...ext.info, chainId: network, type: 'eip191', ...over }, account, requestUrl));
    }
    /** A wallet with the change of one paid request as its balance (pay-per-request credits the payment and charges the request). */
    async function walletWithChange(): Promise<{ payer: FundedAccount; balance: number }> {
      const payer = await h.payer(10n);
      await h.openai(payer).chat.completions.create(BODY);
      const balance = await h.balance(payer.address);
      assert.ok(balance > 0);
      return { payer, balance };
    }
    const usageRows = (wallet: string) => h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('wallet', '=', wallet.toLowerCase()).execute();

    test('the 402 advertises sign-in-with-x: a fresh gateway-issued nonce, the gateway domain, the configured chains, bounded validity', async () => {
      const [a, b] = [await challenge(), await challenge()];
      assert.notEqual(a.ext.info.nonce, b.ext.info.nonce);
      assert.equal(a.ext.info.domain, new URL(origin).host);
      assert.equal(a.ext.info.uri, url());
      const home = h.gw.config.siwe.contractWalletChainId;
      assert.equal(home, h.anvil.chainId);
      assert.deepEqual(
        a.ext.supportedChains.map((c) => c.chainId),
        [home, ...h.gw.config.siwe.chainIds.filter((id) => id !== home)].map((id) => `eip155:${id}`),
        'the contract-wallet chain first',
      );
      assert.ok(
        a.ext.supportedChains.some((c) => c.chainId === a.network),
        'the offers chain is one the client can sign for',
      );
      assert.equal(Date.parse(a.ext.info.expirationTime!) - Date.parse(a.ext.info.issuedAt), h.gw.config.siwe.windowSeconds * 1000);
    });

    test('stock openai SDK + wrapFetchWithSIWx: JSON and streamed answers billed to the balance, no payment, under the pay-per-request key', async () => {
      const { payer, balance } = await walletWithChange();
      const payments = await h.gw.services.storage.db.selectFrom('payments').select('id').execute();
      const sdk = siwxOpenai(payer);
      const { data, response } = await sdk.chat.completions.create(BODY).withResponse();
      assert.match(data.choices[0]!.message.content!, /fake provider/);
      const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged > 0);
      assert.equal(response.headers.get('payment-response'), null, 'nothing was paid');

      const stream = await sdk.chat.completions.create({ ...BODY, stream: true, stream_options: { include_usage: true } });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
      assert.match(text, /fake provider/);

      const rows = await usageRows(payer.address);
      assert.equal(rows.length, 3, 'the paid request and the two SIWX ones');
      const siwxCharged = rows.slice(1).reduce((s, r) => s + Number(r.charged_usdc), 0);
      assert.equal(await h.balance(payer.address), balance - siwxCharged);
      assert.equal(new Set(rows.map((r) => r.api_key_id)).size, 1, 'one pseudo key carries every keyless request of the wallet');
      assert.equal((await h.gw.services.storage.db.selectFrom('payments').select('id').execute()).length, payments.length, 'no payment was taken');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('@x402/fetch with the SIWX client extension: pays while the wallet has no balance, then spends the change without paying', async () => {
      const payer = await h.payer(10n);
      const sdk = await siwxPayingOpenai(h, origin, payer);
      const first = await sdk.chat.completions.create(BODY).withResponse();
      assert.ok(first.response.headers.get('payment-response'), 'no balance yet: the first request is paid');
      const change = await h.balance(payer.address);
      const second = await sdk.chat.completions.create(BODY).withResponse();
      assert.equal(second.response.headers.get('payment-response'), null, 'the second is signed for, not paid');
      assert.equal(await h.balance(payer.address), change - Number(second.response.headers.get('x-tollgate-charged-usdc')));
      const payments = await h.gw.services.storage.db.selectFrom('payments').select('id').where('payer', '=', payer.address.toLowerCase()).execute();
      assert.equal(payments.length, 1);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test("the wallet's chat rate-limit window counts SIWX requests, as its keys' requests; a refused signature counts nothing", async () => {
      const { payer } = await walletWithChange();
      const remaining = (r: Response) => Number(r.headers.get('x-ratelimit-remaining'));
      const first = await post({ 'sign-in-with-x': await signed(payer) });
      assert.equal(first.status, 200, await first.clone().text());
      assert.equal(Number(first.headers.get('x-ratelimit-limit')), 100_000, 'the chat window (rateLimits.chat), not the per-IP one');
      const refusedPayload = JSON.parse(Buffer.from(await signed(payer), 'base64').toString());
      refusedPayload.signature = refusedPayload.signature.replace(/.$/, (c: string) => (c === '0' ? '1' : '0'));
      const refused = await post({ 'sign-in-with-x': Buffer.from(JSON.stringify(refusedPayload)).toString('base64') });
      assert.equal(refused.status, 402);
      const second = await post({ 'sign-in-with-x': await signed(payer) });
      assert.equal(second.status, 200);
      assert.equal(remaining(second), remaining(first) - 1, 'one request counted between them: the refused one was not');
    });

    test('two instances on one database: a challenge of one is spent at the other, and its replay at the first is refused', async () => {
      const { payer, balance } = await walletWithChange();
      const other = await startTestGateway({
        engine,
        databaseUrl: h.gw.config.database.url,
        env: h.env,
        // Behind one public URL, as instances behind a load balancer are.
        config: mergeConfig(h.gatewayConfig, {
          server: { publicUrl: origin },
          providers: { fake: { baseUrl: h.fake.url }, other: { baseUrl: h.fake.url } },
          models: MODELS,
          payPerRequest: { enabled: true },
          rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
        }),
      });
      try {
        const header = await signed(payer);
        const atOther = await fetch(`${other.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'sign-in-with-x': header },
          body: JSON.stringify(BODY),
        });
        assert.equal(atOther.status, 200, await atOther.clone().text());
        const replay = await post({ 'sign-in-with-x': header });
        assert.equal(replay.status, 402);
        assert.match((await replay.json()).message, /already used/);
        assert.equal(await h.balance(payer.address), balance - Number(atOther.headers.get('x-tollgate-charged-usdc')));
        await assertLedgerConsistent(h.gw.services.storage.db);
      } finally {
        await other.stop();
      }
    });

    /** A deployed ERC-1271 wallet of a fresh owner, with a 1 USD top-up as its balance. */
    async function contractWalletWithBalance() {
      const owner = await h.payer(0n);
      const wallet = await h.chain.deploySmartWallet(owner.address, `0x${randomBytes(32).toString('hex')}`);
      await h.chain.mintUsdc(wallet, 10n * USD);
      const offer = (await h.post({ amount: 1 })).body.accepts[0];
      const payment = await signEip3009({
        token: h.chain.usdc,
        chainId: h.anvil.chainId,
        domain: USDC_DOMAIN,
        from: { address: wallet },
        signer: owner,
        to: h.payTo.address,
        value: USD,
      });
      assert.equal((await h.post({ amount: 1 }, { 'payment-signature': v2Header(offer, payment) })).status, 200);
      // The wallet's own signer: the owner's key signs, the wallet's ERC-1271 says yes.
      return { wallet, signer: { address: wallet, signMessage: ({ message }: { message: string }) => owner.signMessage({ message }) } };
    }

    test('a contract wallet (ERC-1271) spends its balance with SIWX on the contract-wallet chain', async () => {
      const { wallet, signer } = await contractWalletWithBalance();
      const res = await wrapFetchWithSIWx(fetch, signer)(url(), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(BODY),
      });
      assert.equal(res.status, 200, await res.clone().text());
      assert.equal(await h.balance(wallet), 1_000_000 - Number(res.headers.get('x-tollgate-charged-usdc')));
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    describe('attack: sign-in-with-x', () => {
      test('a contract wallet signing for another chain: refused, as with SIWE (its address may have another owner there)', async () => {
        const { wallet, signer } = await contractWalletWithBalance();
        const { ext } = await challenge();
        const header = encodeSIWxHeader(await createSIWxPayload({ ...ext.info, chainId: 'eip155:8453', type: 'eip191' }, signer, url()));
        const res = await post({ 'sign-in-with-x': header });
        assert.equal(res.status, 402);
        assert.match((await res.json()).message, /contract wallets sign in only on chain 84532/);
        assert.equal(await h.balance(wallet), 1_000_000);
      });

      test('replay of one signature, sequential: the second use is refused with a fresh challenge, charged once', async () => {
        const { payer, balance } = await walletWithChange();
        const sent: string[] = [];
        const recording: typeof fetch = async (input, init) => {
          const header = (input instanceof Request ? input.headers : new Headers(init?.headers)).get('sign-in-with-x');
          if (header) sent.push(header);
          return fetch(input, init);
        };
        await siwxOpenai(payer, recording).chat.completions.create(BODY);
        assert.equal(sent.length, 1);
        const after1 = await h.balance(payer.address);
        assert.ok(after1 < balance);
        const calls = h.fake.received.length;
        const replay = await post({ 'sign-in-with-x': sent[0]! });
        assert.equal(replay.status, 402);
        const body = await replay.json();
        assert.equal(body.code ?? body.error?.code ?? body.error, 'SIWX_REJECTED');
        assert.match(body.message, /already used/);
        assert.ok(decodePaymentRequiredHeader(replay.headers.get('payment-required')!).extensions!['sign-in-with-x'], 'the refusal carries a new challenge');
        assert.equal(h.fake.received.length, calls, 'the provider was not called');
        assert.equal(await h.balance(payer.address), after1);
        await assertLedgerConsistent(h.gw.services.storage.db);
      });

      test('replay of one signature, concurrent: exactly one of 8 runs', async () => {
        const { payer } = await walletWithChange();
        const header = await signed(payer);
        const results = await Promise.all(Array.from({ length: 8 }, () => post({ 'sign-in-with-x': header })));
        assert.deepEqual(results.map((r) => r.status).sort(), [200, 402, 402, 402, 402, 402, 402, 402]);
        assert.equal((await usageRows(payer.address)).length, 2, 'the paid request and one SIWX request');
        await assertLedgerConsistent(h.gw.services.storage.db);
      });

      const refusals: Array<[string, (p: FundedAccount) => Promise<string>, RegExp]> = [
        [
          'signed for another domain',
          (p) => signed(p, { domain: 'evil.example', uri: 'http://evil.example/v1/chat/completions' }, 'http://evil.example/v1/chat/completions'),
          /domain "evil.example" is not accepted/,
        ],
        ['signed for another route of this gateway', (p) => signed(p, { uri: `${origin}/v1/topup` }), /signed for \/v1\/topup/],
        [
          'expired (a challenge this gateway issued 10 minutes ago)',
          async (p) => {
            const old = siwxChallenge({
              publicUrl: origin,
              resourceUrl: url(),
              chainIds: h.gw.config.siwe.chainIds,
              windowSeconds: h.gw.config.siwe.windowSeconds,
              secret: h.gw.services.keySecret,
              now: Date.now() - 600_000,
            });
            return encodeSIWxHeader(await createSIWxPayload({ ...old.info, chainId: `eip155:${h.anvil.chainId}`, type: 'eip191' }, p, url()));
          },
          /issued more than 300 s ago/,
        ],
        [
          'a nonce the gateway never issued',
          (p) => signed(p, { nonce: 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90' }),
          /not issued by this gateway/,
        ],
        [
          'its validity stretched by the client',
          (p) => signed(p, { expirationTime: new Date(Date.now() + 86_400_000).toISOString() }),
          /not issued by this gateway/,
        ],
        ['a chain the gateway does not accept', (p) => signed(p, { chainId: 'eip155:10' }), /chain id 10 is not accepted/],
        ['another statement', (p) => signed(p, { statement: 'Read my Tollgate usage and top-ups.' }), /must carry the statement/],
        [
          'a tampered signature',
          async (p) => {
            const payload = JSON.parse(Buffer.from(await signed(p), 'base64').toString());
            payload.signature = payload.signature.slice(0, 10) + (payload.signature[10] === 'a' ? 'b' : 'a') + payload.signature.slice(11);
            return Buffer.from(JSON.stringify(payload)).toString('base64');
          },
          /signature does not match/,
        ],
        [
          'signed by one wallet, naming another',
          async (p) => {
            const payload = JSON.parse(Buffer.from(await signed(p), 'base64').toString());
            payload.address = (await h.payer(0n)).address;
            return Buffer.from(JSON.stringify(payload)).toString('base64');
          },
          /signature does not match/,
        ],
        ['not a SIWX payload', async () => Buffer.from('{"hello":1}').toString('base64'), /not a SIWX payload/],
      ];
      for (const [name, make, reason] of refusals) {
        test(`${name}: 402 with a fresh challenge, nothing charged, the provider not called`, async () => {
          const { payer, balance } = await walletWithChange();
          const calls = h.fake.received.length;
          const res = await post({ 'sign-in-with-x': await make(payer) });
          assert.equal(res.status, 402);
          const body = await res.json();
          assert.match(body.message, reason);
          assert.match(body.message, /nothing was charged and the request did not run/);
          assert.equal(h.fake.received.length, calls);
          assert.equal(await h.balance(payer.address), balance);
        });
      }

      test('a wallet with no balance: the normal 402, nothing runs (the stock client gets the 402 back)', async () => {
        const stranger = await h.payer(10n);
        const calls = h.fake.received.length;
        const res = await wrapFetchWithSIWx(fetch, stranger)(url(), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(BODY),
        });
        assert.equal(res.status, 402);
        const body = await res.json();
        assert.match(body.message, /has no balance at this gateway/);
        assert.ok(body.accepts.length > 0);
        assert.equal(h.fake.received.length, calls);
        assert.equal(await h.balance(stranger.address), 0);
      });

      test('a balance that cannot cover the reservation: 402 naming the balance and the reservation, nothing charged', async () => {
        const { payer, balance } = await walletWithChange();
        // About 25k prompt tokens and 4096 completion tokens reserve about 4 cents; the change is under 1.
        const big = { ...BODY, messages: [{ role: 'user', content: 'word '.repeat(20_000) }], max_tokens: 4096 };
        const calls = h.fake.received.length;
        const res = await wrapFetchWithSIWx(fetch, payer)(url(), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(big),
        });
        assert.equal(res.status, 402);
        const body = await res.json();
        assert.match(body.message, new RegExp(`available balance ${balance} micro-USDC cannot cover this request's reserved cost`));
        assert.match(body.message, /or pay this request with one of accepts/);
        assert.equal(h.fake.received.length, calls);
        assert.equal(await h.balance(payer.address), balance);
        await assertLedgerConsistent(h.gw.services.storage.db);
      });
    });
  });
}
