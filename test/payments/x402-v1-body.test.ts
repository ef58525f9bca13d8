import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EVM_NETWORK_CHAIN_ID_MAP } from '@x402/evm/v1';
import { parseConfig } from '../../src/config/load.ts';
import { decodePaymentHeader } from '../../src/payments/decode.ts';
import { matchPayment } from '../../src/payments/match.ts';
import { buildOffers } from '../../src/payments/offers.ts';
import { caipOfV1Network, paymentRequiredV1, V1_NETWORK_NAMES, v1Exclusions, v1NetworkName, v1Offers } from '../../src/payments/x402-v1.ts';
import { startupSummary } from '../../src/startup-summary.ts';

/** The v1 network table, which offers the v1 body lists, and how a v1 payment finds its offer (no chain, no server). */
const PAY_TO = '0x1111111111111111111111111111111111111111';
const USDC_BASE_SEPOLIA = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const EURC = '0x808456652fdb597867f38412077A9182bf77359F';
const USDT = '0x2222222222222222222222222222222222222222';
const ON_1 = '0x3333333333333333333333333333333333333333';

const offer = (network: string, asset: string, transferMethod: 'eip3009' | 'permit2', name = 'USD Coin') => ({
  network,
  asset,
  transferMethod,
  name,
  version: '2',
  decimals: 6,
});
const config = (x402v1Body: boolean) =>
  parseConfig(
    {
      siwe: { contractWalletChainId: 84532 },
      chains: { '84532': { rpcUrl: 'http://127.0.0.1:1' }, '1': { rpcUrl: 'http://127.0.0.1:1' }, '8453': { rpcUrl: 'http://127.0.0.1:1' } },
      topup: {
        payTo: PAY_TO,
        x402v1Body,
        offers: [
          offer('eip155:84532', USDT, 'permit2', 'Tether USD'),
          offer('eip155:84532', USDC_BASE_SEPOLIA, 'eip3009'),
          offer('eip155:84532', EURC, 'eip3009', 'EURC'),
          offer('eip155:1', ON_1, 'eip3009'),
          offer('eip155:8453', USDC_BASE_SEPOLIA, 'eip3009'),
        ],
      },
    },
    { TOLLGATE_RELAYER_KEY: `0x${'5'.repeat(64)}` },
  );

describe('x402 v1 network names', () => {
  test("the table is the stock v1 clients' list, and agrees with @x402/evm on every id", () => {
    assert.equal(Object.keys(V1_NETWORK_NAMES).length, 15);
    for (const [id, name] of Object.entries(V1_NETWORK_NAMES)) {
      assert.equal(EVM_NETWORK_CHAIN_ID_MAP[name as keyof typeof EVM_NETWORK_CHAIN_ID_MAP], Number(id), name);
      assert.equal(caipOfV1Network(name), `eip155:${id}`);
      assert.equal(v1NetworkName(`eip155:${id}`), name);
    }
    assert.equal(v1NetworkName('eip155:1'), undefined, "ethereum is not in the stock v1 clients' list");
    assert.equal(v1NetworkName('eip155:31337'), undefined);
    assert.equal(caipOfV1Network('eip155:84532'), 'eip155:84532');
    assert.equal(caipOfV1Network('Base-Sepolia'), undefined);
    assert.equal(caipOfV1Network('toString'), undefined);
  });
});

describe('the v1 body', () => {
  test('lists the first EIP-3009 offer of each named network, in order, with the v1 fields; leaves out Permit2, a second EIP-3009 token and unnamed chains', () => {
    const c = config(true);
    const offers = buildOffers(c.topup, 2_500_000);
    assert.deepEqual(
      v1Offers(offers).map((o) => [o.config.network, o.config.asset]),
      [
        ['eip155:84532', USDC_BASE_SEPOLIA],
        ['eip155:8453', USDC_BASE_SEPOLIA],
      ],
    );
    const body = paymentRequiredV1('https://gw.example/v1/topup', offers, 'PAYMENT_REQUIRED', 'Prepaid balance');
    assert.equal(body.x402Version, 1);
    assert.deepEqual(body.accepts[0], {
      scheme: 'exact',
      network: 'base-sepolia',
      amount: '2500000',
      maxAmountRequired: '2500000',
      resource: 'https://gw.example/v1/topup',
      description: 'Prepaid balance',
      mimeType: 'application/json',
      payTo: PAY_TO,
      maxTimeoutSeconds: 300,
      asset: USDC_BASE_SEPOLIA,
      extra: { assetTransferMethod: 'eip3009', name: 'USD Coin', version: '2', decimals: 6 },
    });
    assert.equal(body.accepts[1]!.network, 'base');
    assert.deepEqual(
      v1Exclusions(c.topup.offers).map((e) => [e.network, e.asset, e.reason.split(/[:(]/)[0]!.trim()]),
      [
        ['eip155:84532', USDT, 'permit2'],
        ['eip155:84532', EURC, 'not the first EIP-3009 offer on eip155'],
        ['eip155:1', ON_1, 'eip155'],
      ],
    );
  });

  test('start-up summary names what the v1 body leaves out, only when the v1 body is on', () => {
    const server = { url: 'http://127.0.0.1:1', metricsUrl: null };
    assert.deepEqual(startupSummary(config(false), server).x402v1BodyOmits, []);
    const omits = startupSummary(config(true), server).x402v1BodyOmits;
    assert.equal(omits.length, 3);
    assert.match(omits[0]!.reason, /sign EIP-3009 only/);
    assert.match(omits[2]!.reason, /no x402 v1 network name/);
  });

  test('off by default', () => {
    assert.equal(parseConfig({}).topup.x402v1Body, false);
    assert.throws(() => parseConfig({ topup: { x402v1Body: 'yes' } }));
  });
});

describe('a v1 payment finds the offer the v1 body listed', () => {
  const c = config(true);
  const offers = buildOffers(c.topup, 1_000_000);
  const header = (network: string) =>
    Buffer.from(
      JSON.stringify({
        x402Version: 1,
        scheme: 'exact',
        network,
        payload: {
          signature: `0x${'11'.repeat(65)}`,
          authorization: {
            from: '0x4444444444444444444444444444444444444444',
            to: PAY_TO,
            value: '1000000',
            validAfter: '0',
            validBefore: '9999999999',
            nonce: `0x${'ab'.repeat(32)}`,
          },
        },
      }),
    ).toString('base64');

  test('base-sepolia → the first EIP-3009 offer there (USDC), never EURC; base → its own', () => {
    const m = matchPayment(decodePaymentHeader(header('base-sepolia')), offers);
    assert.equal(m.identity.asset, USDC_BASE_SEPOLIA.toLowerCase());
    assert.equal(m.identity.network, 'eip155:84532');
    assert.equal(m.payload.x402Version, 2);
    assert.equal(matchPayment(decodePaymentHeader(header('base')), offers).identity.network, 'eip155:8453');
  });

  test('a name with no offer, or no name at all, is PAYMENT_MISMATCH', () => {
    for (const network of ['polygon', 'nope', '__proto__', 'constructor']) {
      assert.throws(
        () => matchPayment(decodePaymentHeader(header(network)), offers),
        (e: any) => e.code === 'PAYMENT_MISMATCH',
        network,
      );
    }
  });
});
