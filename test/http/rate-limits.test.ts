import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { newAccount, proofQuery, siweProof, createKeyProof } from '../support/siwe.ts';

describe('rate limits outside chat', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ engine: 'sqlite', config: { rateLimits: { keys: { perMinute: 2 }, public: { perMinute: 6 } } } });
  });
  after(() => gw.stop());

  test('key management is limited per wallet', async () => {
    const account = newAccount();
    assert.equal((await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account))).status, 201);
    assert.equal((await call(gw.url, 'GET', `/v1/auth/keys?${proofQuery(await siweProof(account))}`)).status, 200);
    const limited = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
    assert.equal(limited.status, 429);
    assert.equal(limited.body.error, 'RATE_LIMITED');
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    const keys = await gw.services.storage.db.selectFrom('api_keys').selectAll().where('wallet', '=', account.address.toLowerCase()).execute();
    assert.equal(keys.length, 1, 'the refused request created nothing');
  });

  test('unauthenticated endpoints are limited per client IP', async () => {
    let status = 0;
    let n = 0;
    while (n < 20) {
      n++;
      status = (await call(gw.url, 'GET', '/v1/models')).status;
      if (status === 429) break;
    }
    assert.equal(status, 429);
    assert.ok(n <= 7, `limited after ${n} requests (6 a minute, the key tests used some)`);
    assert.equal((await call(gw.url, 'GET', '/health')).status, 200, 'health checks are never limited');
  });
});
