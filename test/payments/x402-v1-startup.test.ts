import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { tempDir } from '../support/engines.ts';

/** `tollgate serve` with topup.x402v1Body: one start-up warning names each offer the v1 body leaves out, and why. */
const PAY_TO = '0x1111111111111111111111111111111111111111';
const offer = (network: string, asset: string, transferMethod: string, name: string) => ({ network, asset, transferMethod, name, version: '2', decimals: 6 });

describe('start-up with topup.x402v1Body', () => {
  let gw: GatewayProcess | undefined;
  after(() => gw?.stop());

  test('warns about the Permit2 offer and the chain without a v1 name; says nothing when the v1 body is off', async () => {
    const config = (x402v1Body: boolean) => ({
      database: { url: `sqlite:${tempDir()}/t.db` },
      siwe: { contractWalletChainId: 84532 },
      chains: { '84532': { rpcUrl: 'http://127.0.0.1:9' }, '31337': { rpcUrl: 'http://127.0.0.1:9' } },
      topup: {
        payTo: PAY_TO,
        x402v1Body,
        offers: [
          offer('eip155:84532', '0x2222222222222222222222222222222222222222', 'eip3009', 'USD Coin'),
          offer('eip155:84532', '0x3333333333333333333333333333333333333333', 'permit2', 'Tether USD'),
          offer('eip155:31337', '0x4444444444444444444444444444444444444444', 'eip3009', 'Local USDC'),
        ],
      },
    });
    const env = { TOLLGATE_RELAYER_KEY: `0x${'5'.repeat(64)}` };
    gw = await startGatewayProcess(config(true), env);
    const warning = gw
      .output()
      .split('\n')
      .find((l) => l.includes('topup.x402v1Body'));
    assert.ok(warning, gw.output());
    const line = JSON.parse(warning);
    assert.equal(line.level, 40);
    assert.deepEqual(
      line.omitted.map((o: { name: string }) => o.name),
      ['Tether USD', 'Local USDC'],
    );
    assert.match(line.msg, /Tether USD .*\(permit2: the stock v1 clients sign EIP-3009 only\)/);
    assert.match(line.msg, /eip155:31337 has no x402 v1 network name/);
    await gw.stop();
    gw = await startGatewayProcess(config(false), env);
    assert.ok(!gw.output().includes('topup.x402v1Body'), gw.output());
  });
});
