import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { freePort } from '../../src/devchain/ports.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { parse, stringify } from 'yaml';
import { docBlock } from '../../scripts/doc-blocks.mjs';
import { defaultModels } from '../../src/config/defaults.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../../src/fake-providers/fake-anthropic.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import type { FundedAccount } from '../../src/devchain/deploy.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { call, mergeConfig, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { TEST_ORIGIN } from '../support/origin.ts';
import { siweProof } from '../support/siwe.ts';
import { startTopupHarness, USD, type TopupHarness } from '../support/topup-harness.ts';

/**
 * The code blocks of README.md and docs/*.md, run as a user would run them: each is
 * read from the markdown by the id of its `<!-- runs: test/docs/examples.test.ts#id -->` marker
 * (scripts/doc-blocks.mjs), its placeholders are filled in (the gateway's URL for
 * http://localhost:8080 and the example hosts, a real key for sk-…, a wallet for 0xYourWallet, a
 * signed SIWE message for "<fresh SIWE message>"), and it runs: shell blocks with bash and the real
 * curl (`tollgate` and `npx tollgate` are this checkout's bin/tollgate.mjs), TypeScript blocks as a
 * file with node and tsx. The gateways are test gateways on 127.0.0.1 with fake providers; the
 * x402 blocks pay real USDC on anvil.
 */

const ROOT = process.cwd();
const BIN = join(ROOT, 'bin/tollgate.mjs');
// Scripts live under test/node_modules/.cache so that their imports resolve: the clients (openai, the AI SDK) from
// test/node_modules (test/package.json), viem and @x402/fetch from the gateway's own node_modules above it.
const SCRIPTS = join(ROOT, 'test', 'node_modules', '.cache', 'doc-blocks');

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

type Subs = [string | RegExp, string][];

/** Fills `subs` where they occur, and `required`, which must each occur (else the doc moved on from this test). */
function fill(text: string, subs: Subs, required: Subs = []): string {
  let out = text;
  for (const [from, to] of required) {
    const before = out;
    out = typeof from === 'string' ? out.split(from).join(to) : out.replace(from, to);
    assert.notEqual(out, before, `the placeholder ${String(from)} is not in the block any more: update this test's substitutions\n${text}`);
  }
  for (const [from, to] of subs) out = typeof from === 'string' ? out.split(from).join(to) : out.replace(from, to);
  return out;
}

function exec(file: string, args: string[], env: NodeJS.ProcessEnv, cwd = ROOT): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(file, args, { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, cwd, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A shell block, with bash: `tollgate …` and `npx tollgate …` run this checkout. */
function sh(text: string, env: NodeJS.ProcessEnv = {}, cwd = ROOT): Promise<Ran> {
  const prelude = [
    'set -eo pipefail',
    `tollgate() { node ${BIN} "$@"; }`,
    `npx() { if [ "$1" = tollgate ]; then shift; node ${BIN} "$@"; else command npx "$@"; fi; }`,
  ].join('\n');
  return exec('bash', ['-c', `${prelude}\n${text}`], env, cwd);
}

/** A TypeScript block, as a module of its own. */
function ts(text: string, env: NodeJS.ProcessEnv = {}): Promise<Ran> {
  mkdirSync(SCRIPTS, { recursive: true });
  const dir = mkdtempSync(join(SCRIPTS, 'block-'));
  const file = join(dir, 'block.mts');
  writeFileSync(file, text);
  return exec(process.execPath, ['--import', 'tsx', file], env).finally(() => rmSync(dir, { recursive: true, force: true }));
}

const ok = (r: Ran) => {
  assert.equal(r.code, 0, `exit ${r.code}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  return r.stdout;
};

/** A SIWE proof's message and signature, as JSON members inside a single-quoted shell string. */
const quotedForShell = (s: string) => s.replace(/'/g, `'\\''`);

describe('doc blocks against a gateway with the built-in OpenAI catalog and an Anthropic provider', () => {
  let openai: FakeOpenAI;
  let anthropic: FakeAnthropic;
  let gw: TestGateway;
  let dir: string;
  let origin: string;
  let configFile: string;
  const ownerKey = generatePrivateKey();
  const owner = privateKeyToAccount(ownerKey);
  let apiKey = '';
  let subs: Subs;
  let env: NodeJS.ProcessEnv;

  const proof = (account: PrivateKeyAccount, action: 'create-key' | 'manage-keys' | 'loosen-key' | 'sign-in') =>
    siweProof(account, { domain: new URL(origin).host, uri: origin, action });
  const maxKeyId = async () =>
    Number(
      (
        await gw.services.storage.db
          .selectFrom('api_keys')
          .select((eb) => eb.fn.max('id').as('id'))
          .executeTakeFirst()
      )?.id ?? 0,
    );

  before(async () => {
    openai = await startFakeOpenAI();
    anthropic = await startFakeAnthropic();
    dir = mkdtempSync(join(tmpdir(), 'tollgate-doc-blocks-'));
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    const databaseUrl = await freshDatabaseUrl('sqlite');
    // The two configuration excerpts of docs/api.md are loaded as they are written; only the
    // Anthropic provider's address is the fake's.
    const anthropicConfig = parse(docBlock('anthropic-config')) as { providers: Record<string, Record<string, unknown>>; models: unknown[] };
    const cachedPrices = parse(docBlock('cached-prices-config')) as { models: unknown[] };
    const embeddingModels = parse(docBlock('embeddings-config')) as { models: unknown[] };
    gw = await startTestGateway({
      engine: 'sqlite',
      databaseUrl,
      env: { OPENAI_API_KEY: 'sk-provider', ANTHROPIC_API_KEY: 'sk-ant-provider', DEEPSEEK_API_KEY: 'sk-provider' },
      config: {
        server: { port, publicUrl: origin },
        providers: {
          openai: { baseUrl: openai.url },
          anthropic: { ...anthropicConfig.providers.anthropic, baseUrl: anthropic.url },
          // docs/api.md's per-key limits example names a deepseek model.
          deepseek: { baseUrl: openai.url, apiKeyEnv: 'DEEPSEEK_API_KEY' },
        },
        models: [
          ...defaultModels,
          ...anthropicConfig.models,
          ...cachedPrices.models,
          ...embeddingModels.models,
          { provider: 'deepseek', name: 'deepseek-chat', contextLength: 64000, promptCostPer1M: '0.27', completionCostPer1M: '1.1' },
        ],
        rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 }, keys: { perMinute: 100_000 }, public: { perMinute: 100_000 } },
      },
    });
    assert.equal(gw.url, origin);
    await adjustBalance(gw.services.storage.db, { wallet: owner.address, amountUsdc: 50_000_000, note: 'doc blocks' });
    const created = await call(gw.url, 'POST', '/v1/auth/keys', await proof(owner, 'create-key'));
    assert.equal(created.status, 201, created.text);
    apiKey = created.body.key;
    configFile = join(dir, 'tollgate.yaml');
    writeFileSync(configFile, stringify({ database: { url: databaseUrl } }));
    subs = [
      ['http://localhost:8080', origin],
      ['https://tollgate.example.com', origin],
      ['https://gateway.example.com', origin],
      [/localhost:8080/g, new URL(origin).host],
      [/sk-(…|\.\.\.)(?=["\s])/g, apiKey],
      [/0xYourWallet(Address)?/g, owner.address],
    ];
    env = {
      TOLLGATE_KEY: apiKey,
      KEY: apiKey,
      GATEWAY: origin,
      GW: origin,
      TOLLGATE: origin,
      WALLET: owner.address,
      TOLLGATE_URL: origin,
      TOLLGATE_CONFIG: configFile,
    };
  });
  after(async () => {
    await gw?.assertLedger();
    await gw?.stop();
    await openai?.close();
    await anthropic?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const chatAnswer = (out: string) => assert.equal(JSON.parse(out).object, 'chat.completion', out);

  test('README: the chat completions curl and the openai-node example', async () => {
    chatAnswer(ok(await sh(fill(docBlock('readme-chat-curl'), subs), env)));
    assert.ok(ok(await ts(fill(docBlock('readme-chat-openai'), subs), env)).length > 0);
  });

  test('README and api.md: embeddings with curl and the openai SDK', async () => {
    const vectors = (out: string, count: number) => {
      const answer = JSON.parse(out);
      assert.equal(answer.object, 'list', out);
      assert.equal(answer.data.length, count);
      assert.ok(answer.data.every((d: { embedding: unknown }) => Array.isArray(d.embedding)));
      assert.ok(answer.usage.prompt_tokens > 0);
    };
    vectors(ok(await sh(fill(docBlock('readme-embeddings-curl'), subs), env)), 1);
    vectors(ok(await sh(fill(docBlock('embeddings-curl'), subs), env)), 2);
    const [count, dimensions, tokens] = ok(await ts(fill(docBlock('embeddings-openai'), subs), env))
      .trim()
      .split(' ')
      .map(Number);
    assert.deepEqual([count, dimensions], [2, 8]);
    assert.ok(tokens! > 0);
    const [readmeDimensions, readmeTokens, charged] = ok(await ts(fill(docBlock('readme-embeddings-openai'), subs), env))
      .trim()
      .split(' ')
      .map(Number);
    assert.equal(readmeDimensions, 8);
    assert.ok(readmeTokens! > 0 && charged! > 0, 'the prompt tokens and the charge in usage');
  });

  test('api.md: errors, health, models', async () => {
    const unauthorized = ok(await sh(fill(docBlock('errors-unauthorized'), subs), env));
    assert.equal(JSON.parse(unauthorized).error, 'UNAUTHORIZED');
    assert.equal(JSON.parse(ok(await sh(fill(docBlock('health'), subs), env))).status, 'ok');
    const models = JSON.parse(ok(await sh(fill(docBlock('models'), subs), env))) as { data: { id: string }[] };
    assert.ok(models.data.some((m) => m.id === 'openai/gpt-4o-mini'));
    assert.equal(JSON.parse(ok(await sh(fill(docBlock('model-curl'), subs), env))).id, 'openai/gpt-4o-mini');
    const prelude = `import OpenAI from 'openai';\nconst client = new OpenAI({ baseURL: '${origin}/v1', apiKey: process.env.TOLLGATE_KEY });\n`;
    const retrieved = ok(await ts(`${prelude}${docBlock('model-retrieve')}console.log(JSON.stringify(model));\n`, env));
    assert.equal(JSON.parse(retrieved).id, 'openai/gpt-4o-mini');
    // The cached-token prices excerpt, loaded above, lists the prices its comment shows.
    const gpt4o = JSON.parse(ok(await sh(fill(docBlock('models-cached-prices'), subs), env)));
    assert.deepEqual(
      [gpt4o.id, gpt4o.promptPricePer1MTokens, gpt4o.completionPricePer1M, gpt4o.cachedPromptPricePer1M, gpt4o.cacheWritePricePer1M, gpt4o.cacheReadPricePer1M],
      ['openai/gpt-4o', 3, 12, 1.5, 3, 3],
    );
  });

  test('api.md: chat completions, Anthropic models through chat completions, the Responses API, the Messages API', async () => {
    chatAnswer(ok(await sh(fill(docBlock('chat-curl'), subs), env)));
    ok(await ts(fill(docBlock('chat-openai'), subs), env));
    chatAnswer(ok(await sh(fill(docBlock('anthropic-chat-curl'), subs), env)));
    ok(await ts(fill(docBlock('anthropic-chat-openai'), subs), env));
    assert.ok(anthropic.received.length >= 2, 'the Anthropic examples reached the Anthropic provider');
    assert.equal(JSON.parse(ok(await sh(fill(docBlock('responses-curl'), subs), env))).object, 'response');
    ok(await ts(fill(docBlock('responses-openai'), subs), env));
    ok(await ts(fill(docBlock('responses-ai-sdk'), subs), env));
    assert.equal(JSON.parse(ok(await sh(fill(docBlock('messages-curl'), subs), env))).type, 'message');
    ok(await ts(fill(docBlock('messages-anthropic-sdk'), subs), env));
    // The charge in the final usage, JSON and streamed.
    const charged = ok(await ts(fill(docBlock('charge-openai'), subs), env));
    assert.match(charged, /^JSON: [1-9]\d* micro-USDC$/m);
    assert.match(charged, /^stream: 0\.\d+ USD$/m);
  });

  test('api.md: SIWE, keys (curl with siwe.txt, viem), per-key limits (curl and CLI), sessions', async () => {
    assert.ok(JSON.parse(ok(await sh(fill(docBlock('siwe-info'), subs), env))).statements);
    const cwd = mkdtempSync(join(dir, 'siwe-'));
    const signed = async (action: 'create-key' | 'manage-keys') => {
      const p = await proof(owner, action);
      writeFileSync(join(cwd, 'siwe.txt'), p.message);
      return p.signature;
    };
    const created = JSON.parse(ok(await sh(fill(docBlock('keys-create-curl'), subs, [['0x…', await signed('create-key')]]), env, cwd)));
    assert.match(created.key, /^sk-/);
    const listed = JSON.parse(ok(await sh(fill(docBlock('keys-list-curl'), subs, [['0x…', await signed('manage-keys')]]), env, cwd)));
    assert.ok(listed.data.some((k: { id: number }) => k.id === created.id));
    const revoked = ok(
      await sh(
        fill(docBlock('keys-revoke-curl'), subs, [
          ['keys/1 ', `keys/${created.id} `],
          ['0x…', await signed('manage-keys')],
        ]),
        env,
        cwd,
      ),
    );
    assert.equal(JSON.parse(revoked).revoked, true);

    const viemKey = ok(await ts(`${fill(docBlock('keys-create-viem'), subs)}console.log(key);\n`, { WALLET_PRIVATE_KEY: ownerKey }));
    assert.match(viemKey, /^sk-/);

    // Two fresh proofs for the two placeholders: create-key, then loosen-key for the PATCH.
    const limited = (await maxKeyId()) + 1;
    const [create, loosen] = [await proof(owner, 'create-key'), await proof(owner, 'loosen-key')];
    const members = (p: { message: string; signature: string }) => quotedForShell(`${JSON.stringify(p.message)}, "signature": ${JSON.stringify(p.signature)}`);
    const limitsBlock = docBlock('key-limits-curl')
      .replace('"<fresh SIWE message>", "signature": "0x…"', members(create))
      .replace('"<fresh SIWE message>", "signature": "0x…"', members(loosen));
    const limitsOut = ok(await sh(fill(limitsBlock, subs, [['/v1/auth/keys/12', `/v1/auth/keys/${limited}`]]), env));
    assert.match(limitsOut, /"spend_limit_usdc":5000000,"spend_limit_period":"day"/);
    assert.match(limitsOut, /"spend_limit_usdc":20000000,"spend_limit_period":"month","models":null/);

    const cliKey = (await maxKeyId()) + 1;
    const cliOut = ok(await sh(fill(docBlock('key-limits-cli'), [[/(update|show|limit) 12\b/g, `$1 ${cliKey}`]]), { ...env, TOLLGATE_WALLET_KEY: ownerKey }));
    assert.match(cliOut, /^sk-/);
    assert.match(cliOut, new RegExp(`updated key ${cliKey}`));

    const signIn = await proof(owner, 'sign-in');
    const sessionBlock = docBlock('session-curl')
      .replace('"<EIP-4361 message>"', quotedForShell(JSON.stringify(signIn.message)))
      .replace('"0x…"', JSON.stringify(signIn.signature));
    const session = JSON.parse(ok(await sh(sessionBlock, env))).token as string;
    assert.match(session, /^ses-/);
    const signedOut = JSON.parse(ok(await sh(docBlock('sessions-signout-curl'), { ...env, SESSION: session })));
    assert.equal(signedOut.wallet, owner.address.toLowerCase());
    assert.ok(signedOut.revoked >= 1, JSON.stringify(signedOut));
    const sessionPrelude = `import { privateKeyToAccount } from 'viem/accounts';\nconst gateway = '${origin}';\nconst account = privateKeyToAccount(process.env.WALLET_PRIVATE_KEY as \`0x\${string}\`);\n`;
    const keys = JSON.parse(ok(await ts(`${sessionPrelude}${docBlock('session-viem')}console.log(JSON.stringify(keys));\n`, { WALLET_PRIVATE_KEY: ownerKey })));
    assert.ok(keys.data.length >= 4, JSON.stringify(keys));
  });

  test('api.md: usage and usage per day', async () => {
    assert.equal(JSON.parse(ok(await sh(fill(docBlock('usage-curl'), subs), env))).wallet, owner.address.toLowerCase());
    assert.equal(JSON.parse(ok(await sh(fill(docBlock('usage-daily'), subs), env))).days, 30);
  });

  test('operations.md: fund a wallet, create keys with redeem and referral codes, chat, metrics, API descriptions', async () => {
    const funded = ok(await sh(fill(docBlock('ops-fund'), subs), env));
    const redeem = /rc-\S+/.exec(funded)?.[0];
    assert.ok(redeem, funded);
    const referrer = privateKeyToAccount(generatePrivateKey()).address;
    const ref = ok(await sh(`tollgate admin ref-codes create --wallet ${referrer}`, env)).trim();
    const created = ok(
      await sh(
        fill(docBlock('ops-create-key'), [
          [/0x<64 hex digits>/g, generatePrivateKey()],
          ['rc-...', redeem],
          ['ref-...', ref],
        ]),
        env,
      ),
    );
    assert.match(created, /the redeem code credited \$2\.000000/);
    assert.equal(created.match(/^sk-/gm)?.length, 3, created);
    chatAnswer(ok(await sh(fill(docBlock('ops-chat'), subs), env)));
    const metrics = ok(await sh(fill(docBlock('ops-metrics'), [], [['http://127.0.0.1:9464', gw.metricsUrl!]]), env));
    assert.match(metrics, /^tollgate_charged_usdc_total\{model="openai\/gpt-4o-mini"\} \d+/m);
    const described = ok(await sh(fill(docBlock('ops-api-descriptions'), subs), env));
    assert.match(described, /"\/v1\/chat\/completions"/);
    assert.match(described, /top up/i);
  });
});

describe('doc blocks that pay with x402, on anvil with USDC and USDT', () => {
  let h: TopupHarness;
  let fake: FakeOpenAI;
  let v1: TestGateway | undefined;
  let own: TestGateway | undefined;
  let upto: TestGateway | undefined;
  let channels: TestGateway | undefined;
  let payer: FundedAccount;
  let subs: Subs;

  before(async () => {
    fake = await startFakeOpenAI();
    h = await startTopupHarness('sqlite', {
      config: {
        providers: { openai: { baseUrl: fake.url } },
        models: defaultModels,
        payPerRequest: { enabled: true },
        rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
      },
      env: { OPENAI_API_KEY: 'sk-provider' },
    });
    payer = await h.payer(100n);
    // The examples name USDC on Base; the test chain's USDC is another address on chain 84532.
    subs = [
      ['https://gateway.example.com', h.gw.url],
      ['http://localhost:8080', h.gw.url],
      [/eip155:8453'/g, `${h.chain.network}'`],
      [/0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'/g, `${h.chain.usdc}'`],
    ];
  });
  after(async () => {
    await v1?.assertLedger();
    await v1?.stop();
    await own?.assertLedger();
    await own?.stop();
    await upto?.assertLedger();
    await upto?.stop();
    await channels?.assertLedger();
    await channels?.stop();
    await h?.gw.assertLedger();
    await h?.stop();
    await fake?.close();
  });

  test('api.md: the 402 offer, then the @x402/fetch top-up, whose cap refuses a larger payment unsigned', async () => {
    const offer = ok(await sh(fill(docBlock('topup-402'), subs)));
    assert.match(offer, /^HTTP\/1\.1 402 Payment Required/);
    assert.match(offer, /^payment-required: /im);
    assert.match(offer, /"x402Version":2/);

    const paid = ok(await ts(fill(docBlock('topup-x402-fetch'), subs), { WALLET_KEY: payer.privateKey }));
    assert.match(paid, /^200 /);
    assert.equal(await h.balance(payer.address), 20_000_000);

    // The comment's promise: a 402 for more than 20 USDC throws before anything is signed.
    const before = await h.chain.balanceOf(h.chain.usdc, payer.address);
    const over = await ts(fill(docBlock('topup-x402-fetch'), subs, [['JSON.stringify({ amount: 20 })', 'JSON.stringify({ amount: 21 })']]), {
      WALLET_KEY: payer.privateKey,
    });
    assert.notEqual(over.code, 0, over.stdout);
    assert.match(over.stderr, /rejected by spendControls\.allowedAssets maxAmountPerPayment/);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), before);
    assert.equal(await h.balance(payer.address), 20_000_000);
  });

  test('api.md: pay per request, with the OpenAI SDK over @x402/fetch and the first step with curl', async () => {
    const first = ok(await sh(fill(docBlock('pay-per-request-curl'), subs)));
    assert.match(first, /^HTTP\/1\.1 402 Payment Required/, first);
    assert.match(first, /"required_usdc":\d+/);
    const client = await h.chain.newAccount({ usdc: 5n * USD });
    const answer = ok(await ts(`${fill(docBlock('pay-per-request-openai'), subs)}console.log(JSON.stringify(answer));\n`, { WALLET_KEY: client.privateKey }));
    assert.equal(JSON.parse(answer).object, 'chat.completion');
    assert.ok((await h.balance(client.address)) > 0, 'what the request did not use stays in the balance');
  });

  test('api.md: pay per request with x402 upto and the stock upto client: exactly the charge is settled', async () => {
    const relayer = await h.chain.newAccount();
    upto = await startTestGateway({
      engine: 'sqlite',
      env: { ...h.env, TOLLGATE_RELAYER_KEY: relayer.privateKey, OPENAI_API_KEY: 'sk-provider' },
      config: mergeConfig(h.gatewayConfig, {
        providers: { openai: { baseUrl: fake.url } },
        models: defaultModels,
        payPerRequest: { enabled: true, upto: true },
        rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
      }),
    });
    // The example's token is an offer paid through Permit2: on the test chain, the USDT-like token.
    const uptoSubs: Subs = [
      ['https://gateway.example.com', upto.url],
      [/eip155:8453'/g, `${h.chain.network}'`],
      [/0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'/g, `${h.chain.usdt}'`],
    ];
    const agent = await h.chain.newAccount({ usdt: 5n * USD });
    await h.chain.approvePermit2(agent, h.chain.usdt);
    const answer = JSON.parse(
      ok(await ts(`${fill(docBlock('pay-per-request-upto'), uptoSubs)}console.log(JSON.stringify(answer));\n`, { WALLET_KEY: agent.privateKey })),
    );
    assert.equal(answer.object, 'chat.completion');
    const charged = answer.usage.charged_usdc as number;
    assert.ok(charged > 0);
    const db = upto.services.storage.db;
    let row: { upto_state: string | null; onchain_amount_atomic: string | null } | undefined;
    for (let i = 0; i < 200 && row?.upto_state !== 'settled'; i++) {
      row = await db.selectFrom('payments').select(['upto_state', 'onchain_amount_atomic']).where('payer', '=', agent.address.toLowerCase()).executeTakeFirst();
      if (row?.upto_state !== 'settled') await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(row?.upto_state, 'settled');
    assert.equal(row?.onchain_amount_atomic, String(charged));
    assert.equal(await h.chain.balanceOf(h.chain.usdt, agent.address), 5n * USD - BigInt(charged), 'the agent paid exactly the charge');
  });

  test('api.md: an agent pays per token through a batch-settlement channel with the stock client, and gets the rest back', async () => {
    const relayer = await h.chain.newAccount();
    channels = await startTestGateway({
      engine: 'sqlite',
      env: { ...h.env, TOLLGATE_RELAYER_KEY: relayer.privateKey, OPENAI_API_KEY: 'sk-provider' },
      config: mergeConfig(h.gatewayConfig, {
        providers: { openai: { baseUrl: fake.url } },
        models: defaultModels,
        payPerRequest: { enabled: true, batchSettlement: { enabled: true } },
        rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
      }),
    });
    const channelSubs: Subs = [
      ['https://gateway.example.com', channels.url],
      [/eip155:8453'/g, `${h.chain.network}'`],
      [/0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'/g, `${h.chain.usdc}'`],
    ];
    const agent = await h.chain.newAccount({ usdc: 5n * USD });
    const out = ok(await ts(fill(docBlock('pay-per-request-channels'), channelSubs), { WALLET_KEY: agent.privateKey, RPC_URL: h.anvil.rpcUrl }));
    const { charged, refunded } = JSON.parse(out.trim().split('\n').at(-1)!);
    assert.ok(charged > 0);
    assert.equal(Number(refunded), 1_000_000 - charged, 'the deposit less the charges came back');
    assert.equal(await h.chain.balanceOf(h.chain.usdc, agent.address), 5n * USD - BigInt(charged), 'the agent paid exactly its charges');
    const transfers = await channels.services.storage.db.selectFrom('channel_transfers').select('kind').execute();
    assert.deepEqual(transfers.map((t) => t.kind).sort(), ['deposit', 'refund'], 'two transactions for the whole session');
  });

  test('api.md: the top-up history of the wallet that paid', async () => {
    const key = await call(h.gw.url, 'POST', '/v1/auth/keys', await siweProof(privateKeyToAccount(payer.privateKey), { action: 'create-key' }));
    assert.equal(key.status, 201, key.text);
    const history = JSON.parse(ok(await sh(fill(docBlock('topups-history'), subs, [['0xYourWallet', payer.address]]), { KEY: key.body.key })));
    assert.equal(history.topups[0].status, 'credited');
    assert.equal(history.topups[0].credited_usdc, 20_000_000);
  });

  test('operations.md: tollgate wallet, every command of the list', async () => {
    const owner = await h.chain.newAccount({ usdc: 20n * USD, usdt: 20n * USD });
    await h.chain.approvePermit2(owner, h.chain.usdt);
    const configFile = join(mkdtempSync(join(tmpdir(), 'tollgate-doc-blocks-')), 'tollgate.yaml');
    writeFileSync(configFile, stringify({ database: { url: h.gw.config.database.url } }));
    const code = ok(await sh('tollgate admin redeem-codes create --usd 1', { TOLLGATE_CONFIG: configFile })).trim();
    const nextKey =
      Number(
        (
          await h.gw.services.storage.db
            .selectFrom('api_keys')
            .select((eb) => eb.fn.max('id').as('id'))
            .executeTakeFirst()
        )?.id ?? 0,
      ) + 1;
    const block = fill(docBlock('ops-wallet-cli'), [
      ['TOLLGATE_WALLET_KEY=0x…', `TOLLGATE_WALLET_KEY=${owner.privateKey}`],
      // The harness's gateway is reached at 127.0.0.1 but announces its public URL's domain; a user's
      // TOLLGATE_URL is the public URL, so the CLI signs for its host. Here the domain is named.
      ['export TOLLGATE_URL=https://llm.example.com', `export TOLLGATE_URL=${h.gw.url} TOLLGATE_SIWE_DOMAIN=${new URL(TEST_ORIGIN).host}`],
      ['--redeem-code rc-…', `--redeem-code ${code}`],
      ['keys revoke 3', `keys revoke ${nextKey}`],
    ]);
    const out = ok(await sh(block));
    assert.match(out, /^private key {2}0x[0-9a-f]{64}\naddress {6}0x[0-9a-fA-F]{40}\n/, 'wallet new: a fresh key and its address, each labelled');
    assert.match(out, new RegExp(`^${owner.address}$`, 'm'));
    assert.match(out, /^credited \$5\.000000; balance \$10\.000000$/m);
    assert.match(out, new RegExp(`^revoked key ${nextKey}$`, 'm'));
    assert.equal(await h.balance(owner.address), 11_000_000);
    rmSync(join(configFile, '..'), { recursive: true, force: true });
  });

  test('api.md: the v1 body and x402-fetch 1.x, on a gateway with topup.x402v1Body: true', async () => {
    const relayer = await h.chain.newAccount();
    v1 = await startTestGateway({
      engine: 'sqlite',
      env: { ...h.env, TOLLGATE_RELAYER_KEY: relayer.privateKey },
      config: mergeConfig(h.gatewayConfig, { topup: { x402v1Body: true } }),
    });
    const v1Subs: Subs = [
      ['http://localhost:8080', v1.url],
      ['https://gateway.example.com', v1.url],
    ];
    const offer = ok(await sh(fill(docBlock('topup-v1-body'), v1Subs)));
    assert.match(offer, /^payment-required: /im);
    assert.match(offer, /"x402Version":1,"error":"PAYMENT_REQUIRED"/);
    assert.match(offer, /"network":"base-sepolia"/);
    const v1Payer = await h.chain.newAccount({ usdc: 10n * USD });
    const paid = ok(await ts(fill(docBlock('topup-x402-fetch-v1'), v1Subs), { WALLET_KEY: v1Payer.privateKey }));
    assert.match(paid, /^200 /);
    assert.equal((await getBalance(v1.services.storage.db, v1Payer.address)).balance_usdc, 5_000_000);
  });

  /**
   * The x402 extensions' blocks need a gateway that announces the URL the client reaches it at: a
   * SIWX challenge names the gateway's domain, and the stock client signs only for the host it talked to.
   */
  async function ownUrlGateway(): Promise<{ gw: TestGateway; subs: Subs }> {
    if (!own) {
      const port = await freePort();
      const relayer = await h.chain.newAccount();
      own = await startTestGateway({
        engine: 'sqlite',
        env: { ...h.env, TOLLGATE_RELAYER_KEY: relayer.privateKey, OPENAI_API_KEY: 'sk-provider' },
        config: mergeConfig(h.gatewayConfig, {
          server: { port, publicUrl: `http://127.0.0.1:${port}` },
          providers: { openai: { baseUrl: fake.url } },
          models: defaultModels,
          payPerRequest: { enabled: true },
          rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
        }),
      });
    }
    const url = own.url;
    return {
      gw: own,
      subs: [
        ['https://gateway.example.com', url],
        ['http://localhost:8080', url],
        [/eip155:8453'/g, `${h.chain.network}'`],
        [/0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'/g, `${h.chain.usdc}'`],
      ],
    };
  }

  test('api.md: Sign-In-With-X with @x402/fetch: the first request is paid, the next spends the change', async () => {
    const { gw, subs } = await ownUrlGateway();
    const wallet = await h.chain.newAccount({ usdc: 5n * USD });
    const block = fill(docBlock('siwx-openai'), subs);
    assert.equal(ok(await ts(block, { WALLET_KEY: wallet.privateKey })).trim(), 'paid');
    const change = (await getBalance(gw.services.storage.db, wallet.address)).balance_usdc;
    assert.ok(change > 0);
    assert.equal(ok(await ts(block, { WALLET_KEY: wallet.privateKey })).trim(), 'spent from the balance');
    assert.ok((await getBalance(gw.services.storage.db, wallet.address)).balance_usdc < change);
  });

  test('api.md: the bazaar entry of a 402, read and validated with the stock helpers', async () => {
    const { subs } = await ownUrlGateway();
    const [valid, input] = ok(await ts(fill(docBlock('bazaar-read'), subs)))
      .trim()
      .split(' ');
    assert.equal(valid, 'true');
    const parsed = JSON.parse(input!);
    assert.equal(parsed.method, 'POST');
    assert.equal(parsed.bodyType, 'json');
    assert.ok(Array.isArray(parsed.body.messages));
  });

  test('api.md: payment-identifier with @x402/fetch: the same id sent again is a 409, paid once', async () => {
    const { subs } = await ownUrlGateway();
    const wallet = await h.chain.newAccount({ usdc: 5n * USD });
    const block = fill(docBlock('payment-identifier'), subs);
    const [status, id] = ok(await ts(block, { WALLET_KEY: wallet.privateKey }))
      .trim()
      .split(' ');
    assert.equal(status, '200');
    const paid = await h.chain.balanceOf(h.chain.usdc, wallet.address);
    const [again] = ok(await ts(block, { WALLET_KEY: wallet.privateKey, PAYMENT_ID: id }))
      .trim()
      .split(' ');
    assert.equal(again, '409');
    assert.equal(await h.chain.balanceOf(h.chain.usdc, wallet.address), paid, 'the retry paid nothing');
  });
});
