import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { parseConfig } from '../../src/config/load.ts';
import { fakeProvidersRefusal } from '../../src/fake-providers/built-in.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { runTollgate } from '../support/cli.ts';
import { call } from '../support/gateway.ts';
import { startTollgateProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { newAccount, siweProof } from '../support/siwe.ts';

const RELAYER = { TOLLGATE_RELAYER_KEY: `0x${'11'.repeat(32)}` };
/** Top-ups of USDC on one chain (the RPC is never called: only the configuration is judged). */
const offerOn = (chainId: number) => ({
  chains: { [String(chainId)]: { rpcUrl: 'http://127.0.0.1:9' } },
  topup: {
    payTo: '0x000000000000000000000000000000000000dEaD',
    offers: [{ network: `eip155:${chainId}`, asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', transferMethod: 'eip3009', name: 'USD Coin', version: '2' }],
  },
});
const configWith = (raw: Record<string, unknown>) => parseConfig(raw, RELAYER);

describe('attack: --fake-providers cannot sell canned answers for real money', () => {
  test('refused with NODE_ENV=production, with top-ups on a mainnet or unknown chain, and beside a provider of the same name', () => {
    assert.match(fakeProvidersRefusal(configWith({}), { NODE_ENV: 'production' })!, /NODE_ENV is production/);
    assert.match(
      fakeProvidersRefusal(configWith(offerOn(8453)), {})!,
      /stablecoins on eip155:8453, not a known test or local chain, so real money could buy canned answers/,
    );
    assert.match(fakeProvidersRefusal(configWith(offerOn(999_999)), {})!, /eip155:999999/, 'a chain the table does not know counts as real money');
    const clash = configWith({ providers: { fake: { baseUrl: 'http://127.0.0.1:9/v1' } }, models: [] });
    assert.match(fakeProvidersRefusal(clash, {})!, /already has a provider named fake/);
  });

  test('allowed on a fresh configuration and with top-ups on a test chain (Base Sepolia)', () => {
    assert.equal(fakeProvidersRefusal(configWith({}), {}), null);
    assert.equal(fakeProvidersRefusal(configWith(offerOn(84532)), {}), null);
  });

  test('tollgate serve --fake-providers with NODE_ENV=production exits 2 with the reason, and serves nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-fake-refused-'));
    try {
      const res = await runTollgate(['serve', '--fake-providers'], { NODE_ENV: 'production', TOLLGATE_CONFIG: '', HOME: dir });
      assert.equal(res.code, 2, res.stdout + res.stderr);
      assert.match(res.stderr, /^tollgate: --fake-providers serves canned answers, not a model's[^\n]*NODE_ENV is production/);
      assert.doesNotMatch(res.stdout + res.stderr, /listening/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('tollgate serve --fake-providers: every protocol answers canned text, billed, with the stock SDKs', () => {
  let dir: string;
  let gateway: GatewayProcess;
  let storage: Storage;
  let key = '';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tollgate-fake-providers-'));
    const database = { url: `sqlite:${join(dir, 'tollgate.db')}` };
    gateway = await startTollgateProcess(['serve', '--fake-providers'], { database, rateLimits: { chat: { perMinute: 1000 } } });
    storage = openStorage(database.url);
    const owner = newAccount();
    await adjustBalance(storage.db, { wallet: owner.address, amountUsdc: 1_000_000, note: 'fake providers test' });
    const created = await call(gateway.url, 'POST', '/v1/auth/keys', await siweProof(owner, { action: 'create-key' }));
    assert.equal(created.status, 201, created.text);
    key = created.body.key;
  });
  after(async () => {
    await gateway?.stop();
    await storage?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('chat completions, Messages and embeddings: each answer says it is canned and is charged', async () => {
    const openai = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: key });
    const chat = await openai.chat.completions.create({ model: 'fake/canned-chat', messages: [{ role: 'user', content: 'hi' }] });
    assert.match(chat.choices[0]!.message.content!, /canned answer[\s\S]*no language model was called/);
    const anthropic = new Anthropic({ baseURL: gateway.url, apiKey: key });
    const message = await anthropic.messages.create({ model: 'fake-anthropic/canned-claude', max_tokens: 200, messages: [{ role: 'user', content: 'hi' }] });
    assert.match(message.content[0]!.type === 'text' ? message.content[0].text : '', /canned answer/);
    const vectors = await openai.embeddings.create({ model: 'fake/canned-embedding', input: 'hi' });
    assert.equal(vectors.data.length, 1);
    const charges = await storage.db.selectFrom('request_usage').select('charged_usdc').execute();
    assert.equal(charges.length, 3);
    assert.ok(
      charges.every((c) => Number(c.charged_usdc) > 0),
      JSON.stringify(charges),
    );
    await assertLedgerConsistent(storage.db);
  });
});
