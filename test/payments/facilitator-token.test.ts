import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, mock, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { FastifyInstance } from 'fastify';
import { parseConfig } from '../../src/config/load.ts';
import { createLogger } from '../../src/http/logger.ts';
import { startFacilitatorServer } from '../../src/http/facilitator-server.ts';
import { call } from '../support/gateway.ts';

/**
 * Attacker: anyone who can reach `tollgate facilitator` and wants to spend its relayer's gas. Hole:
 * the bearer token was compared with `!==`, which returns at the first differing byte, so timing
 * could reveal the token a prefix at a time. Defence: SHA-256 of both sides compared with
 * crypto.timingSafeEqual. Timing itself is not asserted (no thresholds in tests): the test checks
 * that every call goes through timingSafeEqual and that only the exact token is accepted.
 */
describe('facilitator server bearer token', () => {
  const token = 'f4c1l1tat0r-s3cret-t0ken';
  let app: FastifyInstance;
  let url: string;
  const compare = mock.method(crypto, 'timingSafeEqual');
  before(async () => {
    const config = parseConfig(
      {
        chains: { '84532': { rpcUrl: 'http://127.0.0.1:9' } },
        topup: {
          payTo: privateKeyToAccount(generatePrivateKey()).address,
          offers: [
            {
              network: 'eip155:84532',
              asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
              transferMethod: 'eip3009',
              name: 'USDC',
              version: '2',
              decimals: 6,
            },
          ],
          facilitator: { type: 'local' },
        },
      },
      { TOLLGATE_RELAYER_KEY: generatePrivateKey() },
    );
    ({ app, url } = await startFacilitatorServer(config, { host: '127.0.0.1', port: 0, logger: createLogger('silent'), token }));
  });
  after(async () => {
    compare.mock.restore();
    await app?.close();
  });

  const wrong = {
    'no header': undefined,
    empty: '',
    'a different token of the same length': `Bearer ${'x'.repeat(token.length)}`,
    'a prefix of the token': `Bearer ${token.slice(0, -1)}`,
    'the token plus one character': `Bearer ${token}x`,
    'the token without the scheme': token,
    'a much longer token': `Bearer ${token.repeat(40)}`,
    'the token with one byte changed': `Bearer ${token.slice(0, 5)}${token[5] === 'a' ? 'b' : 'a'}${token.slice(6)}`,
  };

  for (const [what, header] of Object.entries(wrong)) {
    test(`refuses ${what}, compared in constant time`, async () => {
      const before = compare.mock.callCount();
      const res = await call(url, 'GET', '/health', undefined, header === undefined ? {} : { authorization: header });
      assert.equal(res.status, 401);
      assert.equal(res.body.error, 'UNAUTHORIZED');
      assert.equal(compare.mock.callCount(), before + 1, 'the token check used crypto.timingSafeEqual');
    });
  }

  test('accepts the exact token', async () => {
    const before = compare.mock.callCount();
    const res = await call(url, 'GET', '/health', undefined, { authorization: `Bearer ${token}` });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { status: 'ok' });
    assert.equal(compare.mock.callCount(), before + 1);
  });
});
