import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { generatePaymentId } from '@x402/extensions/payment-identifier';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { exactUsdcClient, payingWithIdentifier } from '../../support/identified-payments.ts';
import { settledUpto, UPTO_BODY, uptoClient, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * The 402 advertises `payment-identifier` beside its upto entries, and an agent that lost an
 * answer retries as the stock `@x402/fetch` client does: a new 402, a new authorization, the same
 * identifier. One identifier is one request whatever the scheme: the retry is refused 409 naming
 * the first request and its charge, and nothing is taken under its authorization.
 */
type Client = (body?: unknown) => Promise<Response>;

/** The stock @x402/fetch client of `payer` (upto, or exact), putting `id` in every payment it signs. */
function payingWithId(h: PayPerRequestHarness, payer: FundedAccount, id: string, scheme: 'upto' | 'exact' = 'upto', sent: string[] = []): Client {
  const pay = payingWithIdentifier(scheme === 'upto' ? uptoClient(h, payer) : exactUsdcClient(h, payer), id, sent);
  const url = `${h.gw.url}/v1/chat/completions`;
  return (body = UPTO_BODY) => pay(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function refusedAsRetry(res: Response, ...mentions: RegExp[]) {
  const text = await res.text();
  assert.equal(res.status, 409, text);
  assert.equal(JSON.parse(text).error?.code ?? JSON.parse(text).error, 'PAYMENT_IDENTIFIER_CONFLICT', text);
  for (const m of mentions) assert.match(text, m);
  return JSON.parse(text) as { first_request_id?: string; first_charged_usdc?: number; first_payment?: string };
}

/** Runs `fn` while the provider takes `delayMs` to answer. */
async function whileSlow<T>(h: PayPerRequestHarness, delayMs: number, fn: () => Promise<T>): Promise<T> {
  h.fake.behaviour = { delayMs };
  try {
    return await fn();
  } finally {
    h.fake.behaviour = {};
  }
}

const holding = (h: PayPerRequestHarness, payer: FundedAccount) =>
  until(async () => (await uptoPayments(h, payer)).some((p) => p.upto_state === 'holding'), 'a request of the wallet holds its maximum');

/** Exactly one charge left the payer's USDT for payTo, ledger and chain agree. */
async function chargedOnce(h: PayPerRequestHarness, payer: FundedAccount) {
  const rows = await uptoPayments(h, payer);
  assert.equal(rows.length, 1, `upto payments recorded: ${rows.length}`);
  const row = await settledUpto(h, payer);
  assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
  assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!), 'one charge on chain');
  await assertLedgerConsistent(h.gw.services.storage.db);
  const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
  assert.deepEqual(audit.problems, [], 'ledger-check --chain');
  return row;
}

for (const engine of ENGINES) {
  describe(`attack: an upto request retried under the same payment identifier (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('after the answer was lost, with a new authorization: 409 naming the first request and its charge; charged once', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const id = generatePaymentId();
      const first = await payingWithId(h, payer, id)();
      assert.equal(first.status, 200, await first.clone().text());
      const requestId = first.headers.get('x-request-id')!;
      const charged = Number(first.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged > 0);
      await settledUpto(h, payer);
      const retry = await payingWithId(h, payer, id)();
      const body = await refusedAsRetry(retry, new RegExp(`charged ${charged} micro-USDC`), new RegExp(requestId), /nothing will be taken under it/);
      assert.equal(body.first_request_id, requestId);
      assert.equal(body.first_charged_usdc, charged);
      await chargedOnce(h, payer);
    });

    // Its Permit2 nonce is spent, so verify refuses it before the identifier can be claimed (the
    // claim needs the signature checked first): a 402, and nothing recorded or taken.
    test('the very same payment header replayed after it ran: refused, nothing more taken', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const sent: string[] = [];
      assert.equal((await payingWithId(h, payer, generatePaymentId(), 'upto', sent)()).status, 200);
      await settledUpto(h, payer);
      const replay = await h.chat(UPTO_BODY, { 'payment-signature': sent[0]! });
      assert.equal(replay.status, 402, replay.text);
      assert.equal(replay.body.error, 'PAYMENT_REJECTED');
      await chargedOnce(h, payer);
    });

    test('while the first is still running: 409 naming it (not "busy, send again"), and still 409 after it finished', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const id = generatePaymentId();
      const first = await whileSlow(h, 1500, async () => {
        const running = payingWithId(h, payer, id)();
        await holding(h, payer);
        await refusedAsRetry(await payingWithId(h, payer, id)(), /still running or not billed yet/);
        return running;
      });
      assert.equal(first.status, 200);
      await settledUpto(h, payer);
      await refusedAsRetry(await payingWithId(h, payer, id)(), /was paid for and ran/);
      await chargedOnce(h, payer);
    });

    test('two at once under one identifier, each with its own authorization: exactly one served', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const id = generatePaymentId();
      const answers = await whileSlow(h, 500, () => Promise.all([payingWithId(h, payer, id)(), payingWithId(h, payer, id)()]));
      assert.deepEqual(answers.map((r) => r.status).sort(), [200, 409]);
      await refusedAsRetry(answers.find((r) => r.status === 409)!);
      await chargedOnce(h, payer);
    });

    test('the identifier reused for another body (another model, another maximum): 409, nothing taken', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const id = generatePaymentId();
      assert.equal((await payingWithId(h, payer, id)()).status, 200);
      await settledUpto(h, payer);
      await refusedAsRetry(await payingWithId(h, payer, id)({ ...UPTO_BODY, max_tokens: 300 }), /another request body/);
      await refusedAsRetry(await payingWithId(h, payer, id)({ ...UPTO_BODY, model: 'fake/thinker' }), /another request body/);
      await chargedOnce(h, payer);
    });

    test('first paid with exact, retried with upto (and the other way round): one request per identifier', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const usdcBefore = await h.chain.balanceOf(h.chain.usdc, payer.address);
      const exactFirst = generatePaymentId();
      const paidExact = await payingWithId(h, payer, exactFirst, 'exact')();
      assert.equal(paidExact.status, 200, await paidExact.clone().text());
      await refusedAsRetry(await payingWithId(h, payer, exactFirst, 'upto')(), /was paid for and ran/);
      assert.equal((await uptoPayments(h, payer)).length, 0, 'no upto payment recorded');
      const exactPaid = usdcBefore - (await h.chain.balanceOf(h.chain.usdc, payer.address));

      const uptoFirst = generatePaymentId();
      const paidUpto = await payingWithId(h, payer, uptoFirst, 'upto')();
      assert.equal(paidUpto.status, 200);
      const charged = Number(paidUpto.headers.get('x-tollgate-charged-usdc'));
      await settledUpto(h, payer);
      await refusedAsRetry(await payingWithId(h, payer, uptoFirst, 'exact')(), new RegExp(`charged ${charged} micro-USDC`), /upto payment \S+ is settled/);
      assert.equal(usdcBefore - (await h.chain.balanceOf(h.chain.usdc, payer.address)), exactPaid, 'the exact retry was not settled');
      await chargedOnce(h, payer);
    });

    test('a first request refused before it ran (the wallet busy) leaves the identifier free: the retry runs', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const id = generatePaymentId();
      await whileSlow(h, 1500, async () => {
        const running = payingWithId(h, payer, generatePaymentId())();
        await holding(h, payer);
        const busy = await payingWithId(h, payer, id)();
        assert.equal(busy.status, 409);
        assert.match(await busy.text(), /UPTO_BUSY/);
        assert.equal((await running).status, 200);
      });
      await settledUpto(h, payer);
      const retry = await payingWithId(h, payer, id)();
      assert.equal(retry.status, 200, await retry.clone().text());
      await settledUpto(h, payer);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
