import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { tcpRelay, type TcpRelay } from '../support/tcp-relay.ts';
import { startTopupHarness, USD, type TopupHarness, usdcAuthorization } from '../support/topup-harness.ts';
import { v2Header } from '../support/x402-payloads.ts';
import { until } from '../support/until.ts';
import { answersWithin } from './support.ts';

const RECOVERY_BOUND_MS = 10_000;

/**
 * The chain's RPC is down when the gateway starts (the node not up yet) and comes up later: top-ups
 * answer 503 naming the RPC meanwhile, and are served once it answers, with no restart. The RPC is
 * reached through a relay the test opens, so the chain behind it is deployed and running throughout.
 */
describe('a gateway started while its chain RPC is down', () => {
  let h: TopupHarness;
  let relay: TcpRelay;
  let gw: TestGateway;
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  before(async () => {
    process.on('unhandledRejection', onRejection);
    h = await startTopupHarness('sqlite');
    relay = await tcpRelay(Number(new URL(h.anvil.rpcUrl).port));
    gw = await startTestGateway({
      engine: 'sqlite',
      env: h.env,
      config: { ...h.gatewayConfig, chains: { [String(h.anvil.chainId)]: { rpcUrl: `http://127.0.0.1:${relay.port}` } } },
    });
  });
  after(async () => {
    process.off('unhandledRejection', onRejection);
    await gw?.stop();
    await relay?.close();
    await h?.stop();
  });

  test('top-ups answer 503 naming the RPC while it is down, and are credited within 10 s of it answering', async () => {
    const rpc = `rpc:${h.anvil.chainId}`;
    const payer = await h.payer();
    const offer = await call(gw.url, 'POST', '/v1/topup', { amount: 5 });
    assert.equal(offer.status, 402, 'offers need no RPC');
    const payload = await usdcAuthorization(h, payer, 5n * USD);
    const pay = () => call(gw.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': v2Header(offer.body.accepts[0], payload) });

    const down = await pay();
    assert.equal(down.status, 503, down.text);
    assert.equal(down.body.error, 'FACILITATOR_UNAVAILABLE');
    assert.match(down.body.message, /RPC/);
    const health = await call(gw.url, 'GET', '/health');
    assert.equal(health.status, 200, 'chat, keys and usage work without the RPC: the instance stays in rotation');
    assert.equal(health.body.checks[rpc], 'down');

    await relay.open();
    const { res: credited } = await answersWithin(pay, 200, RECOVERY_BOUND_MS);
    assert.equal(credited.body.credited_usdc, 5_000_000);
    // /health reuses a probe round for a second: poll it.
    await until(async () => (await call(gw.url, 'GET', '/health')).body.checks[rpc] === 'ok', '/health reports the RPC back', RECOVERY_BOUND_MS);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 95n * USD, 'paid once');
    await gw.assertLedger();
    assert.doesNotMatch(gw.logs(), /unhandled/i);
    assert.deepEqual(rejections, []);
  });
});
