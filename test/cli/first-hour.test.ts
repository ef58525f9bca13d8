import assert from 'node:assert/strict';
import { TEST_ORIGIN } from '../support/origin.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { stringify } from 'yaml';
import { defaultModels } from '../../src/config/defaults.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { openStorage } from '../../src/storage/database.ts';
import { runTollgate } from '../support/cli.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';

const PROVIDER_KEY = 'sk-first-hour-provider-key';

/**
 * The README's walkthrough, command for command: `npm start` (= tollgate serve) with the built-in
 * OpenAI catalog, see what the start-up summary says, set the provider key, fund a wallet with
 * `tollgate admin credit` or a redeem code, create a key with `tollgate wallet keys create`, chat.
 * The only departure from a fresh clone is the config file below: OpenAI's address is the fake
 * provider's, and the database and ports are a test's own.
 */
describe('the first hour: from npm start to a first paid chat', () => {
  let fake: FakeOpenAI;
  let dir: string;
  let adminConfig: string;
  let gateway: GatewayProcess | undefined;
  let config: Record<string, unknown>;
  // Step 4's "no wallet yet?": the owner's wallet is made by `tollgate wallet new`, as the README says.
  let owner = '';
  let ownerAddress = '';
  let apiKey = '';

  before(async () => {
    fake = await startFakeOpenAI();
    dir = mkdtempSync(join(tmpdir(), 'tollgate-first-hour-'));
    const database = { url: `sqlite:${join(dir, 'tollgate.db')}` };
    config = {
      database,
      providers: { openai: { baseUrl: fake.url, apiKeyEnv: 'OPENAI_API_KEY' } },
      models: defaultModels,
    };
    adminConfig = join(dir, 'tollgate.yaml');
    writeFileSync(adminConfig, stringify({ database }));
    const made = await runTollgate(['wallet', '--json', 'new']);
    assert.equal(made.code, 0, made.stderr);
    ({ private_key: owner, address: ownerAddress } = JSON.parse(made.stdout) as { private_key: string; address: string });
    assert.equal(privateKeyToAccount(owner as `0x${string}`).address, ownerAddress);
  });
  after(async () => {
    await gateway?.stop();
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const admin = (...args: string[]) => runTollgate(['--config', adminConfig, 'admin', ...args]);
  const wallet = (key: string, ...args: string[]) =>
    runTollgate(['wallet', '--gateway', gateway!.url, ...args], { TOLLGATE_WALLET_KEY: key, TOLLGATE_SIWE_DOMAIN: new URL(TEST_ORIGIN).host });
  const chat = (key: string) =>
    fetch(`${gateway!.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });

  test('1. npm start without OPENAI_API_KEY: the summary says so, and chats are refused without reaching the provider', async () => {
    gateway = await startGatewayProcess(config);
    const summary = gateway
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"tollgate listening'));
    assert.ok(summary, gateway.output());
    const s = JSON.parse(summary) as Record<string, any>;
    assert.deepEqual(s.models, { openai: ['openai/gpt-4o-mini', 'openai/gpt-4.1', 'openai/o4-mini'] });
    assert.deepEqual(s.providersWithoutKey, [{ provider: 'openai', variable: 'OPENAI_API_KEY' }]);
    assert.match(s.topups, /^off: topup\.offers is empty/);
    assert.match(s.metrics, /^http:\/\/127\.0\.0\.1:\d+\/metrics/);
    assert.equal(s.database, `sqlite:${join(dir, 'tollgate.db')}`);
    assert.match(gateway.output(), /"level":40,[^\n]*"msg":"provider openai has no API key: set OPENAI_API_KEY and restart/);

    const credited = await admin('credit', ownerAddress, '--usd', '5', '--reason', 'first hour');
    assert.equal(credited.code, 0, credited.stderr);
    const created = await wallet(owner, 'keys', 'create', '--label', 'laptop');
    assert.equal(created.code, 0, created.stderr);
    apiKey = created.stdout.split('\n')[0]!;
    assert.match(apiKey, /^sk-/);

    const refused = await chat(apiKey);
    assert.equal(refused.status, 503);
    assert.equal(((await refused.json()) as { error: string }).error, 'PROVIDER_NOT_CONFIGURED');
    assert.equal(fake.received.length, 0);
    await gateway.stop();
    gateway = undefined;
  });

  test('2. with OPENAI_API_KEY set, the wallet credited by the operator chats, and the key reaches the provider', async () => {
    await gateway?.stop(); // left running only if step 1 failed half-way
    gateway = await startGatewayProcess(config, { OPENAI_API_KEY: PROVIDER_KEY });
    assert.match(gateway.output(), /"providersWithoutKey":\[\]/);
    const res = await chat(apiKey);
    assert.equal(res.status, 200, await res.clone().text());
    assert.ok(Number(res.headers.get('x-tollgate-charged-usdc')) > 0);
    assert.ok(Number(res.headers.get('x-tollgate-balance-usdc')) < 5_000_000);
    assert.equal(fake.received.at(-1)?.headers.authorization, `Bearer ${PROVIDER_KEY}`);
  });

  test('3. a redeem code from the operator funds a new wallet through wallet keys create --redeem-code', async () => {
    const made = await admin('redeem-codes', 'create', '--usd', '2');
    assert.equal(made.code, 0, made.stderr);
    const code = made.stdout.trim();
    const friend = generatePrivateKey();
    const created = await wallet(friend, 'keys', 'create', '--redeem-code', code);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /the redeem code credited \$2\.000000/);
    const res = await chat(created.stdout.split('\n')[0]!);
    assert.equal(res.status, 200);
  });

  test('4. the books balance: tollgate admin ledger-check', async () => {
    const res = await admin('ledger-check');
    assert.equal(res.code, 0, res.stdout + res.stderr);
    assert.match(res.stdout, /ledger OK/);
    const storage = openStorage(`sqlite:${join(dir, 'tollgate.db')}`);
    try {
      await assertLedgerConsistent(storage.db);
    } finally {
      await storage.close();
    }
  });
});
