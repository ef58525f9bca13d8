import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { USDC_DOMAIN } from '../../src/devchain/deploy.ts';
import { startDemoStack, Teardown, type DemoStack } from '../../src/demo/stack.ts';
import { call } from '../support/gateway.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { signEip3009, v2Header } from '../support/x402-payloads.ts';

const USD = 1_000_000n;

/**
 * x402 clients in the wild (the Python x402 client, x402-fetch) sign validAfter = now - 600. The
 * token checks it against the block the payment is simulated on, so on a chain that mines only
 * when a transaction arrives, an idle spell longer than that margin makes every payment fail.
 * The demo's chain mines on an interval as well; the margin here is shrunk to 2 s (the chain is
 * left idle for 5 s) so the test need not idle for ten minutes.
 */
describe('the demo chain after an idle spell', () => {
  const teardown = new Teardown();
  let stack: DemoStack;
  before(async () => {
    stack = await startDemoStack(() => ({ ok() {} }), teardown);
  });
  after(() => teardown.run());

  test('accepts a payment signed with validAfter in the recent past', async () => {
    const idleFrom = await stack.anvil.rpc<{ timestamp: string }>('eth_getBlockByNumber', ['latest', false]);
    await sleep(5_000);
    const latest = await stack.anvil.rpc<{ timestamp: string }>('eth_getBlockByNumber', ['latest', false]);
    assert.ok(Number(latest.timestamp) > Number(idleFrom.timestamp), 'blocks were mined while no transaction came');

    const offer = await call(stack.gateway.url, 'POST', '/v1/topup', { amount: 5 });
    assert.equal(offer.status, 402, offer.text);
    const validAfter = BigInt(Math.floor(Date.now() / 1000)) - 2n;
    const payload = await signEip3009({
      token: stack.chain.usdc,
      chainId: stack.anvil.chainId,
      domain: USDC_DOMAIN,
      from: stack.wallet,
      to: stack.payTo.address,
      value: 5n * USD,
      validAfter,
    });
    const paid = await call(stack.gateway.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': v2Header(offer.body.accepts[0], payload) });
    assert.equal(paid.status, 200, paid.text);
    assert.equal(paid.body.credited_usdc, 5_000_000);
    await assertLedgerConsistent(stack.gateway.services.storage.db);
  });
});
