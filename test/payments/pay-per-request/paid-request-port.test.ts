import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseConfig } from '../../../src/config/load.ts';
import type { PaidRequestDeps } from '../../../src/payments/paid-request/deps.ts';
import type { PaidRequest } from '../../../src/payments/paid-request/paid-request.ts';
import { payPerRequest } from '../../../src/payments/paid-request/pay-per-request.ts';
import type { TopupService } from '../../../src/payments/service.ts';

/**
 * The paid-request workflow decides through its port alone (src/payments/paid-request/deps.ts):
 * with a fake port and no gateway, no database and no Fastify, it returns outcome values. Every
 * port method that touches money or the connection fails the test if called where it must not be.
 */
const USDC = '0x' + '11'.repeat(20);
const config = parseConfig(
  {
    chains: { '31337': { rpcUrl: 'http://127.0.0.1:1' } },
    topup: {
      payTo: '0x' + '22'.repeat(20),
      maxUsd: 1,
      offers: [{ network: 'eip155:31337', asset: USDC, transferMethod: 'eip3009', name: 'USD Coin', version: '2', decimals: 6 }],
    },
    payPerRequest: { enabled: true },
  },
  { TOLLGATE_RELAYER_KEY: '0x' + '33'.repeat(32) },
);

const untouched = (what: string) => () => {
  throw new Error(`the workflow used ${what}`);
};

function fakePort(overrides: Partial<PaidRequestDeps> = {}): PaidRequestDeps {
  return {
    db: new Proxy({}, { get: untouched('the database') }) as PaidRequestDeps['db'],
    topup: { uptoFacilitatorFor: () => undefined } as unknown as TopupService,
    settle: new Proxy({}, { get: untouched('the settle path') }) as PaidRequestDeps['settle'],
    config,
    now: () => Date.UTC(2026, 10, 28),
    log: { info: untouched('the log'), warn: untouched('the log') },
    requestId: 'req-1',
    body: {},
    countRequest: untouched('the rate window'),
    siwxOffered: true,
    verifySiwx: untouched('the SIWX verifier'),
    bazaar: untouched('the bazaar entry'),
    showReceipt: untouched('the receipt'),
    showChannelReceipt: untouched('the channel receipt'),
    cutClient: untouched('the connection'),
    ...overrides,
  };
}

const request = (reservationUsdc: number): PaidRequest => ({
  plan: { reservationUsdc } as PaidRequest['plan'],
  path: '/v1/chat/completions',
  description: 'One chat completion',
  shrink: 'lower max_tokens',
  requestDigest: 'a'.repeat(64),
  run: untouched('the run'),
});

describe('the paid-request workflow behind its port', () => {
  test("no payment and no sign-in-with-x: the pay outcome with this request's offer, nothing else touched", async () => {
    const outcome = await payPerRequest(fakePort(), request(4_000), {});
    assert.equal(outcome.kind, 'pay');
    if (outcome.kind !== 'pay') return;
    assert.equal(outcome.code, 'PAYMENT_REQUIRED');
    assert.equal(outcome.offer.path, '/v1/chat/completions');
    assert.match(outcome.offer.resource, /\/v1\/chat\/completions$/);
    assert.equal(outcome.offer.accepts.length, 1);
    // Below payPerRequest.minUsd (1 cent) the price is the floor; the reservation is stated beside it.
    assert.deepEqual(outcome.offer.fields, { required_usdc: 10_000, reserved_usdc: 4_000 });
  });

  test('a request above the largest payment: invalid, saying how to cost less, before any offer', async () => {
    const outcome = await payPerRequest(fakePort(), request(2_000_000), {});
    assert.equal(outcome.kind, 'invalid');
    if (outcome.kind === 'invalid') assert.match(outcome.message, /above the largest payment .*lower max_tokens/);
  });

  test('a sign-in-with-x header where none is offered: pay again with SIWX_REJECTED, the verifier never called', async () => {
    const outcome = await payPerRequest(fakePort({ siwxOffered: false }), request(4_000), { siwx: 'anything' });
    assert.equal(outcome.kind, 'pay');
    if (outcome.kind === 'pay') assert.equal(outcome.code, 'SIWX_REJECTED');
  });

  test('a sign-in-with-x proof the verifier cannot check for an RPC outage: siwx-unavailable, nothing counted or run', async () => {
    const verifySiwx = async () => ({ ok: false as const, status: 503 as const, reason: 'the chain did not answer' });
    const outcome = await payPerRequest(fakePort({ verifySiwx }), request(4_000), { siwx: 'a header' });
    assert.deepEqual(outcome, { kind: 'siwx-unavailable', reason: 'the chain did not answer' });
  });
});
