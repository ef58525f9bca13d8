import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig, parseConfig } from '../../src/config/load.ts';
import { tempDir } from '../support/engines.ts';

function withFile(text: string): { dir: string; path: string } {
  const dir = tempDir();
  const path = join(dir, 'tollgate.yaml');
  writeFileSync(path, text);
  return { dir, path };
}

describe('configuration', () => {
  test('no file gives a working default: port 8080, SQLite under ./data, a priced catalog', () => {
    const config = loadConfig({ cwd: tempDir(), env: {} });
    assert.equal(config.source, null);
    assert.equal(config.server.port, 8080);
    assert.equal(config.database.url, 'sqlite:./data/tollgate.db');
    assert.deepEqual(config.siwe.domains, ['localhost:8080']);
    assert.deepEqual(config.siwe.uris, ['http://localhost:8080']);
    assert.equal(config.keys.maxActivePerWallet, 50);
    assert.equal(config.chat.defaultMaxTokens, 1024);
    assert.deepEqual(config.rateLimits.chat, { perMinute: 60, perDay: 10000 });
    assert.ok(config.models.length > 0);
  });

  test('without server.publicUrl, the public URL (and so the SIWE domain) follows the port, from the file or TOLLGATE_PORT', () => {
    // "port in use; choose another with server.port or TOLLGATE_PORT": a gateway moved so must still
    // accept the proofs `tollgate wallet --gateway http://localhost:<port>` signs for its own host.
    const fromEnv = loadConfig({ cwd: tempDir(), env: { TOLLGATE_PORT: '9090' } });
    assert.equal(fromEnv.server.publicUrl, 'http://localhost:9090');
    assert.deepEqual(fromEnv.siwe.domains, ['localhost:9090']);
    assert.deepEqual(fromEnv.siwe.uris, ['http://localhost:9090']);
    const fromFile = parseConfig({ server: { port: 3000 } });
    assert.deepEqual(fromFile.siwe.domains, ['localhost:3000']);
    // A set publicUrl is kept whatever the port (behind a proxy they differ), and port 0 (any free
    // port, known only once listening) keeps the documented default.
    assert.equal(parseConfig({ server: { port: 3000, publicUrl: 'https://llm.example.com' } }).server.publicUrl, 'https://llm.example.com');
    assert.equal(parseConfig({ server: { port: 0 } }).server.publicUrl, 'http://localhost:8080');
  });

  test('./tollgate.yaml is used when present, --config and TOLLGATE_CONFIG win over it', () => {
    const { dir } = withFile('server: { port: 9001 }\n');
    assert.equal(loadConfig({ cwd: dir, env: {} }).server.port, 9001);
    const other = withFile('server: { port: 9002 }\n');
    assert.equal(loadConfig({ cwd: dir, env: { TOLLGATE_CONFIG: other.path } }).server.port, 9002);
    const third = withFile('server: { port: 9003 }\n');
    assert.equal(loadConfig({ cwd: dir, env: { TOLLGATE_CONFIG: other.path }, path: third.path }).server.port, 9003);
  });

  test('TOLLGATE_PORT overrides server.port, and a bad one is refused', () => {
    const { dir } = withFile('server: { port: 9001 }\n');
    assert.equal(loadConfig({ cwd: dir, env: { TOLLGATE_PORT: '8082' } }).server.port, 8082, 'TOLLGATE_PORT overrides the file');
    assert.throws(() => loadConfig({ cwd: dir, env: { TOLLGATE_PORT: 'http' } }), /TOLLGATE_PORT must be a port number \(0-65535\), got "http"/);
    assert.throws(() => loadConfig({ cwd: dir, env: { TOLLGATE_PORT: '70000' } }), /TOLLGATE_PORT must be a port number/);
  });

  test('a missing explicit file is an error that says where it looked', () => {
    assert.throws(() => loadConfig({ cwd: tempDir(), env: {}, path: 'nope.yaml' }), /nope\.yaml does not exist \(from --config\)/);
  });

  test('a bad value names the key and what is wrong', () => {
    const cases: [string, RegExp][] = [
      ['server: { port: "eighty" }', /server\.port: .*number/],
      ['server: { port: 70000 }', /server\.port: .*65535/],
      ['database: { url: "mysql://x" }', /database\.url: must start with "sqlite:"/],
      ['pricing: { markupPercent: "-5" }', /pricing\.markupPercent: must be a non-negative decimal/],
      ['keys: { maxActivePerWallet: 0 }', /keys\.maxActivePerWallet/],
      ['siwe: { chainIds: [] }', /siwe\.chainIds/],
      ['serverr: {}', /unknown key\(s\) serverr/],
      ['providers: { p: { baseUrl: "x" } }', /providers\.p\.baseUrl: must be an http\(s\) URL/],
      ['providers: { p: { baseUrl: "http://x", apiKeyEnv: "lower" } }', /providers\.p\.apiKeyEnv: must be an environment variable name/],
    ];
    for (const [yaml, pattern] of cases) {
      const { path } = withFile(yaml);
      assert.throws(
        () => loadConfig({ path, env: {} }),
        (err: unknown) => err instanceof ConfigError && pattern.test(err.message),
        yaml,
      );
    }
  });

  test('invalid YAML and a non-mapping are refused clearly', () => {
    assert.throws(() => loadConfig({ path: withFile('server: [').path, env: {} }), /is not valid YAML/);
    assert.throws(() => loadConfig({ path: withFile('- a\n- b\n').path, env: {} }), /must be a YAML mapping/);
  });

  test('a model must name a configured provider, and ids are unique', () => {
    const providers = { p: { baseUrl: 'http://127.0.0.1:1/v1' } };
    const m = { provider: 'p', name: 'm', contextLength: 10, promptCostPer1M: '1', completionCostPer1M: '1' };
    assert.throws(() => parseConfig({ providers, models: [{ ...m, provider: 'q' }] }), /models\.0\.provider: "q" is not one of the configured providers \(p\)/);
    assert.throws(() => parseConfig({ providers, models: [m, m] }), /model id p\/m is listed twice/);
  });

  test('secrets come from the environment variables the file names', () => {
    const config = parseConfig(
      { providers: { p: { baseUrl: 'http://127.0.0.1:1/v1', apiKeyEnv: 'P_KEY' } }, keys: { secretEnv: 'K_SECRET' }, database: { urlEnv: 'DB_URL' } },
      { P_KEY: 'provider-secret', K_SECRET: 'hmac-secret', DB_URL: 'postgres://u:pw@127.0.0.1/db' },
    );
    assert.equal(config.secrets.providerKeys.p, 'provider-secret');
    assert.equal(config.secrets.keySecret, 'hmac-secret');
    assert.equal(config.database.url, 'postgres://u:pw@127.0.0.1/db');
  });

  test("database.urlEnv's variable is checked like database.url, and the error names the variable, not its value", () => {
    for (const value of ['mysql://u:hunter2@db/x', 'garbage', './data/tollgate.db']) {
      assert.throws(
        () => parseConfig({ database: { urlEnv: 'DB_URL' } }, { DB_URL: value }),
        (err: Error) => {
          assert.ok(err instanceof ConfigError, String(err));
          assert.match(err.message, /database\.urlEnv: DB_URL must start with "sqlite:" .* or "postgres:\/\/"/);
          assert.ok(!err.message.includes('hunter2'), err.message);
          return true;
        },
      );
    }
  });

  test('top-up, metrics, CORS and shutdown settings are checked, and each mistake says what to do', () => {
    const usdc = { network: 'eip155:8453', asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', transferMethod: 'eip3009', name: 'USD Coin', version: '2' };
    const payTo = '0x00000000000000000000000000000000000000aa';
    const chains = { '8453': { rpcUrl: 'http://127.0.0.1:1' } };
    const key = `0x${'11'.repeat(32)}`;
    const ok = parseConfig({ chains, topup: { payTo, offers: [usdc] } }, { TOLLGATE_RELAYER_KEY: key });
    assert.equal(ok.secrets.relayerKey, key);
    assert.equal(ok.topup.offers[0]!.decimals, 6);
    assert.equal(ok.topup.minUsd, 1);
    assert.equal(ok.topup.maxUsd, 10_000);
    const env = { TOLLGATE_RELAYER_KEY: key };
    const cases: Array<[unknown, RegExp, NodeJS.ProcessEnv?]> = [
      [{ chains, topup: { offers: [usdc] } }, /topup\.payTo: required when topup\.offers is set/],
      [{ topup: { payTo, offers: [usdc] } }, /needs chains\."8453"\.rpcUrl/],
      [{ chains, topup: { payTo, offers: [usdc] } }, /TOLLGATE_RELAYER_KEY must hold the relayer's private key/, {}],
      [{ chains, topup: { payTo, offers: [usdc] } }, /TOLLGATE_RELAYER_KEY is not a private key/, { TOLLGATE_RELAYER_KEY: 'hunter2' }],
      [{ chains, topup: { payTo, offers: [usdc, usdc] } }, /is listed twice/],
      [{ chains, topup: { payTo, offers: [{ ...usdc, network: 'base' }] } }, /topup\.offers\.0\.network: must be a CAIP-2 EVM network/],
      [{ chains, topup: { payTo, offers: [{ ...usdc, transferMethod: 'eip2612' }] } }, /topup\.offers\.0\.transferMethod/],
      [{ chains, topup: { payTo, offers: [{ ...usdc, decimals: 2 }] } }, /topup\.offers\.0\.decimals/],
      [{ chains, topup: { payTo: '0x12', offers: [usdc] } }, /topup\.payTo: must be a 0x-prefixed 20-byte hex address/],
      [{ topup: { minUsd: 50, maxUsd: 10 } }, /topup\.minUsd \(50\) is above topup\.maxUsd \(10\)/],
      [{ topup: { minUsd: 0.0000001 } }, /topup\.minUsd: must be a USD amount with at most 6 decimals/],
      [{ topup: { facilitator: { type: 'remote' } } }, /topup\.facilitator\.url/],
      [{ topup: { facilitator: { type: 'carrier-pigeon' } } }, /topup\.facilitator/],
      [{ metrics: { port: 70000 } }, /metrics\.port/],
      [{ metrics: { enabled: 'yes' } }, /metrics\.enabled/],
      [{ server: { corsOrigins: ['not a url'] } }, /server\.corsOrigins\.0/],
      [{ server: { corsOrigins: [] } }, /server\.corsOrigins/],
      [{ server: { shutdownGraceSeconds: 0 } }, /server\.shutdownGraceSeconds/],
      [{ server: { acceptCopies: -1 } }, /server\.acceptCopies/],
      [{ server: { acceptCopies: 65 } }, /server\.acceptCopies/],
      [{ server: { acceptCopies: 2.5 } }, /server\.acceptCopies/],
      [{ server: { acceptCopies: 'many' } }, /server\.acceptCopies/],
      [{ keys: { lookupCacheSeconds: 10 } }, /keys\.lookupCacheSeconds: must be at most 5/],
    ];
    for (const [raw, pattern, e] of cases) {
      assert.throws(
        () => parseConfig(raw, e ?? env),
        (err: unknown) => err instanceof ConfigError && pattern.test(err.message),
        JSON.stringify(raw),
      );
    }
    // The key itself never appears in an error.
    assert.throws(
      () => parseConfig({ chains, topup: { payTo, offers: [usdc] } }, { TOLLGATE_RELAYER_KEY: 'not-a-key-but-secret' }),
      (err: Error) => !err.message.includes('not-a-key-but-secret'),
    );
  });

  test('prices written as YAML numbers become exact decimal strings', () => {
    const config = parseConfig({
      providers: { p: { baseUrl: 'http://127.0.0.1:1/v1' } },
      models: [{ provider: 'p', name: 'm', contextLength: 10, promptCostPer1M: 0.15, completionCostPer1M: 2 }],
    });
    assert.equal(config.models[0]!.promptCostPer1M, '0.15');
    assert.equal(config.models[0]!.completionCostPer1M, '2');
  });

  test('the example file is valid and documents every top-level key', async () => {
    const { readFileSync } = await import('node:fs');
    const config = loadConfig({ path: 'tollgate.example.yaml', env: {} });
    assert.ok(config.models.length > 0);
    const text = readFileSync('tollgate.example.yaml', 'utf8');
    const { configSchema } = await import('../../src/config/schema.ts');
    for (const key of Object.keys(configSchema.shape)) assert.match(text, new RegExp(`^#? ?${key}:`, 'm'), `tollgate.example.yaml documents ${key}`);
  });
});
