import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { appendPaymentIdentifierToExtensions, generatePaymentId } from '@x402/extensions/payment-identifier';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { MODELS } from '../../support/chat-harness.ts';
import { mergeConfig, startTestGateway, type TestGateway } from '../../support/gateway.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { settledUpto, UPTO_BODY, uptoClient, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * One payment identifier is one request across every instance of the gateway: two instances on one
 * PostgreSQL database, the payer's agent sending the same identifier to both (a load balancer
 * spreading its retries), with a new authorization each time, another body, or the other scheme.
 * Exactly one request runs, only its payment is taken, and the books and the chain agree.
 * PostgreSQL only: SQLite serves one gateway process (docs/operations.md).
 */
type Scheme = 'upto' | 'exact';

/** The stock @x402/fetch client of `payer` paying `gatewayUrl` with `scheme`, every payment carrying the identifier `id`. */
function sendWithId(h: PayPerRequestHarness, gatewayUrl: string, payer: FundedAccount, id: string, scheme: Scheme = 'upto') {
  const client = scheme === 'upto' ? uptoClient(h, payer) : new x402Client();
  if (scheme === 'exact') {
    registerExactEvmScheme(client, { signer: payer });
    client.setSpendControls({ maxAmountPerPayment: '$1', allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '1000000' }] });
  }
  client.onBeforePaymentCreation(async ({ paymentRequired }) => {
    appendPaymentIdentifierToExtensions(paymentRequired.extensions ?? {}, id);
  });
  const pay = wrapFetchWithPayment(fetch, client);
  return (body: unknown = UPTO_BODY) =>
    pay(`${gatewayUrl}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function statusAndCode(res: Response) {
  const text = await res.text();
  return { status: res.status, code: res.status === 200 ? 'ok' : (JSON.parse(text).error as string), text };
}

describe('attack: one payment identifier sent to two gateway instances (postgres)', () => {
  const harness = uptoSuite('postgres', { topup: { settleWaitSeconds: 2 } });
  let second: TestGateway | undefined;
  after(async () => second?.stop());

  /** A second instance on the harness's database, chain, relayer and provider. */
  async function secondInstance(h: PayPerRequestHarness): Promise<TestGateway> {
    second ??= await startTestGateway({
      engine: 'postgres',
      databaseUrl: h.gw.config.database.url,
      env: h.env,
      config: mergeConfig(h.gatewayConfig, {
        providers: { fake: { baseUrl: h.fake.url }, other: { baseUrl: h.fake.url } },
        models: MODELS,
        payPerRequest: { enabled: true, upto: true },
        rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
        topup: { settleWaitSeconds: 2 },
      }),
    });
    return second;
  }

  async function chargedOnce(h: PayPerRequestHarness, payer: FundedAccount) {
    assert.equal((await uptoPayments(h, payer)).length, 1, 'one upto payment recorded');
    const row = await settledUpto(h, payer);
    assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
    assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'one charge on chain');
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD, 'no exact payment settled');
    await assertLedgerConsistent(h.gw.services.storage.db);
    const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
    assert.deepEqual(audit.problems, [], 'ledger-check --chain');
  }

  test('the same identifier to both instances at once, each with its own authorization: one served, one 409', async () => {
    const h = harness();
    const b = await secondInstance(h);
    const payer = await uptoPayer(h);
    const id = generatePaymentId();
    h.fake.behaviour = { delayMs: 500 };
    let answers;
    try {
      answers = await Promise.all([sendWithId(h, h.gw.url, payer, id)(), sendWithId(h, b.url, payer, id)()].map(async (r) => statusAndCode(await r)));
    } finally {
      h.fake.behaviour = {};
    }
    assert.deepEqual(answers.map((a) => a.code).sort(), ['PAYMENT_IDENTIFIER_CONFLICT', 'ok'], JSON.stringify(answers.map((a) => a.text.slice(0, 300))));
    await chargedOnce(h, payer);
  });

  test('while the first runs on one instance, the other gets another body, another model, the exact scheme: each 409, nothing taken', async () => {
    const h = harness();
    const b = await secondInstance(h);
    const payer = await uptoPayer(h);
    const id = generatePaymentId();
    h.fake.behaviour = { delayMs: 2000 };
    let first: Promise<Response> | undefined;
    try {
      first = sendWithId(h, h.gw.url, payer, id)();
      await until(async () => (await uptoPayments(h, payer)).some((p) => p.upto_state === 'holding'), 'the first request holds its maximum');
      for (const [body, scheme] of [
        [{ ...UPTO_BODY, max_tokens: 300 }, 'upto'],
        [{ ...UPTO_BODY, model: 'fake/thinker' }, 'upto'],
        [UPTO_BODY, 'exact'],
        [UPTO_BODY, 'upto'],
      ] as const) {
        const retry = await statusAndCode(await sendWithId(h, b.url, payer, id, scheme)(body));
        assert.equal(retry.code, 'PAYMENT_IDENTIFIER_CONFLICT', `${scheme} ${JSON.stringify(body)}: ${retry.text.slice(0, 300)}`);
      }
    } finally {
      h.fake.behaviour = {};
    }
    assert.equal((await first!).status, 200);
    const after = await statusAndCode(await sendWithId(h, b.url, payer, id, 'exact')());
    assert.equal(after.code, 'PAYMENT_IDENTIFIER_CONFLICT', after.text.slice(0, 300));
    await chargedOnce(h, payer);
  });
});
