import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { gzipSync } from 'node:zlib';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { newAccount, proofQuery, siweProof, createKeyProof } from '../support/siwe.ts';

describe('errors, limits, request ids and logs', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ engine: 'sqlite' });
  });
  after(() => gw.stop());

  test('an unknown route is 404 in the standard shape', async () => {
    const res = await call(gw.url, 'GET', '/v1/nothing-here');
    assert.equal(res.status, 404);
    assert.equal(res.body.error, 'NOT_FOUND');
    assert.match(res.body.message, /no route GET \/v1\/nothing-here/);
  });

  test('a wrong method is 405 with Allow', async () => {
    const res = await call(gw.url, 'DELETE', '/v1/models');
    assert.equal(res.status, 405);
    assert.equal(res.body.error, 'METHOD_NOT_ALLOWED');
    assert.equal(res.headers.get('allow'), 'GET');
    const keys = await call(gw.url, 'PUT', '/v1/auth/keys/12');
    assert.equal(keys.status, 405);
    assert.equal(keys.headers.get('allow'), 'PATCH, DELETE');
  });

  test('malformed JSON is 400', async () => {
    const res = await fetch(`${gw.url}/v1/auth/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"message": ' });
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), { error: 'VALIDATION_ERROR', message: 'request body is not valid JSON' });
  });

  test('a JSON body that is not an object is 400', async () => {
    for (const body of ['[1,2]', '"text"', 'null']) {
      const res = await fetch(`${gw.url}/v1/auth/keys`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      assert.equal(res.status, 400, body);
      assert.equal((await res.json()).error, 'VALIDATION_ERROR');
    }
  });

  test('an empty JSON body is 400', async () => {
    const res = await fetch(`${gw.url}/v1/auth/keys`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 400);
    assert.equal((await res.json()).error, 'VALIDATION_ERROR');
  });

  test('a wrong content type is 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const res = await fetch(`${gw.url}/v1/auth/keys`, { method: 'POST', headers: { 'content-type': type }, body: 'message=x' });
      assert.equal(res.status, 415, type);
      assert.deepEqual(await res.json(), { error: 'UNSUPPORTED_MEDIA_TYPE', message: 'Content-Type must be application/json' });
    }
  });

  test('a compressed body is 415 naming Content-Encoding, not "not valid JSON"', async () => {
    const body = gzipSync(JSON.stringify({ message: 'x', signature: '0x00' }));
    for (const encoding of ['gzip', 'br', 'zstd']) {
      const res = await fetch(`${gw.url}/v1/auth/keys`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-encoding': encoding },
        body,
      });
      assert.equal(res.status, 415, encoding);
      assert.deepEqual(await res.json(), {
        error: 'UNSUPPORTED_MEDIA_TYPE',
        message: `Content-Encoding ${encoding} is not accepted; send the JSON body uncompressed`,
      });
    }
    // identity is no encoding at all.
    const plain = await fetch(`${gw.url}/v1/auth/keys`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'identity' },
      body: '{"message": ',
    });
    assert.deepEqual(await plain.json(), { error: 'VALIDATION_ERROR', message: 'request body is not valid JSON' });
  });

  test('an oversized body is 413', async () => {
    const res = await call(gw.url, 'POST', '/v1/auth/keys', { message: 'x'.repeat(70 * 1024), signature: '0x00' });
    assert.equal(res.status, 413);
    assert.equal(res.body.error, 'PAYLOAD_TOO_LARGE');
  });

  test('an internal error is 500 with no stack trace or detail, and is logged', async () => {
    const account = newAccount();
    await sql`drop table usage_totals`.execute(gw.services.storage.db);
    const res = await call(gw.url, 'GET', `/v1/usage/${account.address}?${proofQuery(await siweProof(account))}`);
    assert.equal(res.status, 500);
    assert.equal(res.body.error, 'INTERNAL_ERROR');
    assert.match(res.body.message, /^internal error; quote request id [0-9a-f-]{36} when reporting it$/);
    assert.ok(!/usage_totals|at .*\.ts|sqlite/i.test(res.text), res.text);
    assert.match(gw.logs(), /unhandled error/);
  });

  test('every response carries a request id', async () => {
    for (const [method, path] of [
      ['GET', '/health'],
      ['GET', '/v1/models'],
      ['GET', '/nope'],
      ['POST', '/v1/auth/keys'],
    ] as const) {
      const res = await call(gw.url, method, path, method === 'POST' ? {} : undefined);
      assert.match(res.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/, `${method} ${path}`);
    }
  });

  test('API keys, SIWE signatures and messages never reach the logs', async () => {
    const account = newAccount();
    const created = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
    const key = created.body.key as string;
    const proof = await siweProof(account);
    await call(gw.url, 'GET', `/v1/auth/keys?${proofQuery(proof)}`);
    await call(gw.url, 'GET', `/v1/models`, undefined, { authorization: `Bearer ${key}`, 'x-payment': 'c2VjcmV0LXBheW1lbnQ=' });
    await call(gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${key}x` });
    const logs = gw.logs();
    assert.match(logs, /\/v1\/auth\/keys\?message=\[redacted\]&signature=\[redacted\]/);
    for (const secret of [
      key,
      key.slice(3, 20),
      proof.signature,
      proof.signature.slice(2, 30),
      encodeURIComponent(proof.message).slice(0, 60),
      'c2VjcmV0LXBheW1lbnQ=',
    ]) {
      assert.ok(!logs.includes(secret), `log contains a secret fragment ${secret.slice(0, 12)}…`);
    }
  });

  test('attack: sign-in-with-x and x-api-key values never reach the logs', async () => {
    const body = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 10 };
    const siwx = 'secret-sign-in-with-x-value';
    const apiKey = 'tg-secret-x-api-key-value';
    const statuses = [
      (await call(gw.url, 'POST', '/v1/chat/completions', body, { 'sign-in-with-x': siwx })).status,
      (await call(gw.url, 'POST', '/v1/messages', body, { 'x-api-key': apiKey, 'anthropic-version': '2023-06-01' })).status,
    ];
    assert.ok(
      statuses.every((s) => s >= 400),
      String(statuses),
    );
    const logs = gw.logs();
    assert.match(logs, /"url":"\/v1\/messages"/, 'the requests were logged');
    assert.ok(!logs.includes(siwx), 'the sign-in-with-x value was logged');
    assert.ok(!logs.includes(apiKey), 'the x-api-key value was logged');
  });
});
