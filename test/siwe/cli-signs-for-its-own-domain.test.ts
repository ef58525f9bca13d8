import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { LocalAccount } from 'viem';
import { GatewayClient, GatewayError, signingTarget } from '../../src/gateway-client/gateway-client.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { TEST_ORIGIN } from '../support/origin.ts';
import { createKeyProof, newAccount } from '../support/siwe.ts';

const GATEWAY_DOMAIN = new URL(TEST_ORIGIN).host;

/** The account, with every message it signs recorded. */
function recording(account: LocalAccount): { account: LocalAccount; signed: string[] } {
  const signed: string[] = [];
  return {
    signed,
    account: {
      ...account,
      signMessage: async (args) => {
        signed.push(String(args.message));
        return account.signMessage(args);
      },
    },
  };
}

/**
 * The wallet CLI's client signed SIWE proofs for whatever domain and uri the server at its URL
 * announced. A hostile server (a mistyped or phished TOLLGATE_URL, anyone on the path of a plain-http
 * one) announced another gateway's domain, collected the proofs it was sent and relayed them there: a
 * `keys create` against it minted a key on the real gateway for the victim's wallet, whose secret
 * the hostile server kept, and a `keys update` meant to tighten (signed for loosening) lifted a cap.
 */
describe('attack: a hostile gateway URL collects proofs the wallet CLI signs for another gateway', () => {
  let real: ChatHarness;
  let hostile: Server;
  let hostileUrl: string;
  const stolen: string[] = [];

  before(async () => {
    real = await startChatHarness('sqlite');
    hostile = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      let body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
      // A PATCH the victim meant as a tightening: keep the proof, swap the change for "no cap".
      if (req.method === 'PATCH') body = { message: body.message, signature: body.signature, spend_limit_usdc: null };
      // The real gateway's SIWE parameters are announced as its own; whatever is signed is relayed.
      const relayed = await call(real.gw.url, req.method!, req.url!, body);
      if (req.method === 'POST' && req.url === '/v1/auth/keys' && relayed.status === 201) {
        stolen.push(relayed.body.key);
        res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'SERVICE_UNAVAILABLE', message: 'try later' }));
        return;
      }
      res.writeHead(relayed.status, { 'content-type': 'application/json' }).end(relayed.text);
    });
    await new Promise<void>((r) => hostile.listen(0, '127.0.0.1', r));
    hostileUrl = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((r) => hostile.close(r));
    await real.stop();
  });

  const keysOf = (wallet: string) => real.gw.services.storage.db.selectFrom('api_keys').select('id').where('wallet', '=', wallet.toLowerCase()).execute();

  test('keys create against the hostile URL signs nothing and creates no key on the real gateway', async () => {
    const victim = recording(newAccount());
    assert.equal((await call(real.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(victim.account))).status, 201);
    const before = await keysOf(victim.account.address);
    victim.signed.length = 0;
    const err = await new GatewayClient(hostileUrl, victim.account).createKey('my laptop').then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(err instanceof GatewayError && err.code === 'SIWE_DOMAIN_MISMATCH', String(err));
    assert.match(err.message, new RegExp(`asks for proofs signed for ${GATEWAY_DOMAIN}, not for 127\\.0\\.0\\.1:\\d+; nothing was signed`));
    assert.match(err.message, /pass its public domain as --siwe-domain \(or TOLLGATE_SIWE_DOMAIN\); otherwise check the URL$/, 'it says what to do');
    assert.doesNotMatch(err.message, new RegExp(`--siwe-domain ${GATEWAY_DOMAIN}`), 'the announced domain is not offered as a flag to copy');
    assert.deepEqual(victim.signed, [], 'no message was signed');
    assert.deepEqual(await keysOf(victim.account.address), before, 'no key on the real gateway');
    assert.deepEqual(stolen, []);
  });

  test('keys update against the hostile URL signs nothing, and the real key keeps its cap', async () => {
    const victim = recording(newAccount());
    const own = await call(real.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(victim.account)), spend_limit_usdc: 1_000_000 });
    assert.equal(own.status, 201, own.text);
    victim.signed.length = 0;
    await assert.rejects(
      new GatewayClient(hostileUrl, victim.account).updateKey(own.body.id, { spend_limit_usdc: 500_000 }),
      /SIWE_DOMAIN_MISMATCH|asks for proofs/,
    );
    assert.deepEqual(victim.signed, []);
    const row = await real.gw.services.storage.db.selectFrom('api_keys').select('spend_limit_usdc').where('id', '=', own.body.id).executeTakeFirstOrThrow();
    assert.equal(row.spend_limit_usdc, 1_000_000);
  });

  test('a domain the user names is signed for when the gateway accepts it, and refused when it does not', async () => {
    const owner = recording(newAccount());
    const named = new GatewayClient(real.gw.url, owner.account, { siweDomain: GATEWAY_DOMAIN });
    const key = await named.createKey('named');
    assert.ok(key.key.startsWith('sk-'));
    assert.match(owner.signed[0]!, new RegExp(`^${GATEWAY_DOMAIN} wants you to sign in`));
    assert.match(owner.signed[0]!, new RegExp(`\\nURI: ${TEST_ORIGIN}\\n`));
    await assert.rejects(
      new GatewayClient(real.gw.url, owner.account, { siweDomain: 'other.example' }).listKeys(),
      (e: unknown) => e instanceof GatewayError && e.code === 'SIWE_DOMAIN_MISMATCH' && /check the domain you named/.test(e.message),
    );
  });

  test('keys update signs for loosening only when the gateway says the change loosens', async () => {
    const owner = recording(newAccount());
    const client = new GatewayClient(real.gw.url, owner.account, { siweDomain: GATEWAY_DOMAIN });
    const key = await client.createKey('capped', { spend_limit_usdc: 1_000_000 });
    owner.signed.length = 0;
    const tightened = await client.updateKey(key.id, { spend_limit_usdc: 500_000 });
    assert.equal(tightened.spend_limit_usdc, 500_000);
    assert.equal(owner.signed.length, 1, 'one proof for a tightening');
    assert.match(owner.signed[0]!, /List, revoke or tighten my Tollgate API keys/);
    owner.signed.length = 0;
    const loosened = await client.updateKey(key.id, { spend_limit_usdc: null });
    assert.equal(loosened.spend_limit_usdc, null);
    assert.equal(owner.signed.length, 2, 'tried as a tightening, then signed for loosening');
    assert.match(owner.signed[1]!, /Change an API key's limits, including loosening them/);
  });
});

describe('the domain a proof is signed for', () => {
  const params = {
    domain: 'llm.example.com',
    uri: 'https://llm.example.com',
    domains: ['llm.example.com', 'localhost:8080'],
    uris: ['https://llm.example.com', 'http://localhost:8080'],
    chain_ids: [8453],
  };
  test('the URL host when the gateway accepts it, with the accepted uri on that host', () => {
    assert.deepEqual(signingTarget('https://llm.example.com/', params), { domain: 'llm.example.com', uri: 'https://llm.example.com' });
    assert.deepEqual(signingTarget('http://localhost:8080', params), { domain: 'localhost:8080', uri: 'http://localhost:8080' });
  });
  test('a URL by another name is refused unless the user names the domain', () => {
    assert.throws(() => signingTarget('http://10.0.0.5:8080', params), /not for 10\.0\.0\.5:8080/);
    assert.deepEqual(signingTarget('http://10.0.0.5:8080', params, 'llm.example.com'), { domain: 'llm.example.com', uri: 'https://llm.example.com' });
  });
  test('lists of the wrong shape are refused as such, never matched by substring nor a crash', () => {
    const base = { domain: 'llm.example.com', uri: 'https://llm.example.com', chain_ids: [1] };
    for (const odd of [{ domains: 'notllm.example.com' }, { uris: 'https://llm.example.com' }, { domains: [1] }, { domain: undefined, domains: undefined }]) {
      assert.throws(
        () => signingTarget('https://llm.example.com', { ...base, ...odd } as never),
        (e: unknown) => e instanceof GatewayError && e.code === 'SIWE_DOMAIN_MISMATCH',
        JSON.stringify(odd),
      );
    }
  });
  test('a gateway that announces only its first domain (older gateways) is matched against it', () => {
    const older = { domain: 'llm.example.com', uri: 'https://llm.example.com', chain_ids: [1] };
    assert.equal(signingTarget('https://llm.example.com', older).domain, 'llm.example.com');
    assert.throws(() => signingTarget('https://evil.example', older), /SIWE|asks for proofs/);
  });
});
