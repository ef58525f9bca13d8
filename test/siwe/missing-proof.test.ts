import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { newAccount, siweProof } from '../support/siwe.ts';

// The specification (section 5, rule 1) says a missing SIWE signature is 401 UNAUTHORIZED, so a
// body without `signature` or `message` is that, not a 400 VALIDATION_ERROR.

describe('a missing SIWE message or signature is 401', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ engine: 'sqlite' });
  });
  after(() => gw.stop());

  const expect401 = (res: { status: number; body: any }, what: string) => {
    assert.equal(res.status, 401, what);
    assert.equal(res.body.error, 'UNAUTHORIZED', what);
    assert.match(res.body.message, /SIWE|API key/, what);
  };

  test('key create, list and revoke', async () => {
    const { message, signature } = await siweProof(newAccount());
    for (const body of [{}, { message }, { signature }, { label: 'x' }]) {
      expect401(await call(gw.url, 'POST', '/v1/auth/keys', body), `create ${Object.keys(body)}`);
      expect401(await call(gw.url, 'DELETE', '/v1/auth/keys/1', body), `revoke ${Object.keys(body)}`);
    }
    expect401(await call(gw.url, 'GET', '/v1/auth/keys'), 'list without a proof');
    expect401(await call(gw.url, 'GET', `/v1/auth/keys?message=${encodeURIComponent(message)}`), 'list without a signature');
    expect401(await call(gw.url, 'GET', `/v1/auth/keys?signature=${signature}`), 'list without a message');
  });

  test('usage and top-up reads', async () => {
    const account = newAccount();
    const { message, signature } = await siweProof(account);
    for (const path of [`/v1/usage/${account.address}`, `/v1/topups/${account.address}`]) {
      expect401(await call(gw.url, 'GET', path), `${path} without a proof`);
      expect401(await call(gw.url, 'GET', `${path}?message=${encodeURIComponent(message)}`), `${path} without a signature`);
      expect401(await call(gw.url, 'GET', `${path}?signature=${signature}`), `${path} without a message`);
    }
  });
});
