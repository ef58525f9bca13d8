import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { startupWarnings } from '../../src/startup-warnings.ts';
import { tempDir } from '../support/engines.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';

const LOCAL = { local: { baseUrl: 'http://127.0.0.1:9/v1' } };
const MODEL = { provider: 'local', name: 'qwen', contextLength: 32768, promptCostPer1M: '0.1', completionCostPer1M: '0.2' };
const warningsOf = (config: Record<string, unknown>) => startupWarnings(parseConfig({ server: { publicUrl: 'https://api.example.com' }, ...config }));

/**
 * Configurations that start but cannot work as they look are said at start-up, naming the settings:
 * a `providers:` section without `models:` (a new user pointing a provider at a local server), a
 * provider no model uses, and a public URL outside the SIWE rules (every sign-in-with-x challenge
 * would be refused by the gateway's own verifier).
 */
describe('start-up warnings', () => {
  let gw: GatewayProcess | undefined;
  after(() => gw?.stop());

  test("tollgate serve with providers but no models, and siwe.domains without the public URL's host: two warnings naming the settings", async () => {
    gw = await startGatewayProcess({ database: { url: `sqlite:${tempDir()}/t.db` }, providers: LOCAL, siwe: { domains: ['elsewhere.example'] } });
    const warnings = gw
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
      .filter((l) => l.level === 40);
    const empty = warnings.find((w) => /NO MODELS ARE SERVED/.test(w.msg));
    assert.ok(empty, gw.output());
    assert.deepEqual(empty.settings, ['providers', 'models']);
    assert.match(empty.msg, /models: \[\{provider: local, name: /);
    const siwx = warnings.find((w) => /siwe\.domains/.test(w.msg));
    assert.ok(siwx, gw.output());
    assert.deepEqual(siwx.settings, ['server.publicUrl', 'siwe.domains']);
    assert.match(siwx.msg, /server\.publicUrl's host "gateway\.test" is not among siwe\.domains \(elsewhere\.example\)/);
  });

  test('a provider no model or fallback names is reported; one used only as a fallback is not', () => {
    const providers = { ...LOCAL, spare: { baseUrl: 'http://127.0.0.1:9/v1' }, unused: { baseUrl: 'http://127.0.0.1:9/v1' } };
    const warnings = warningsOf({ providers, models: [{ ...MODEL, fallbacks: [{ provider: 'spare' }] }] });
    assert.deepEqual(
      warnings.map((w) => w.settings),
      [['providers.unused', 'models']],
    );
    assert.match(warnings[0]!.message, /provider unused serves no model/);
  });

  test("siwe.uris without the public URL's origin is reported; the defaults (from server.publicUrl) and a list that includes it are not", () => {
    const uris = warningsOf({ siwe: { uris: ['https://other.example.com'] } });
    assert.deepEqual(
      uris.map((w) => w.settings),
      [['server.publicUrl', 'siwe.uris']],
    );
    assert.match(uris[0]!.message, /origin "https:\/\/api\.example\.com" is not among siwe\.uris/);
    assert.deepEqual(warningsOf({}), [], 'the built-in catalog and the default SIWE rules warn of nothing');
    assert.deepEqual(warningsOf({ siwe: { domains: ['api.example.com', 'dashboard.example.com'], uris: ['https://api.example.com/'] } }), []);
  });

  test('upto with a first-byte timeout longer than an authorization leaves a whole answer is reported, with the value that fixes it', () => {
    // Pay-per-request needs top-up offers to parse; the rule reads only these settings.
    const warningsWith = (o: { upto?: boolean; firstByte?: number; maxTimeout?: number }) => {
      const config = parseConfig({ server: { publicUrl: 'https://api.example.com' } });
      return startupWarnings({
        ...config,
        payPerRequest: { ...config.payPerRequest, enabled: true, upto: o.upto ?? true },
        chat: { ...config.chat, firstByteTimeoutSeconds: o.firstByte ?? config.chat.firstByteTimeoutSeconds },
        topup: { ...config.topup, maxTimeoutSeconds: o.maxTimeout ?? config.topup.maxTimeoutSeconds },
      });
    };
    assert.deepEqual(warningsWith({}), [], 'the defaults leave 140 s against 60');
    const long = warningsWith({ firstByte: 180 });
    assert.deepEqual(
      long.map((w) => w.settings),
      [['topup.maxTimeoutSeconds', 'chat.firstByteTimeoutSeconds', 'topup.settleWaitSeconds', 'chat.drainTimeoutSeconds']],
    );
    assert.match(long[0]!.message, /leaves them 140 s to run .* less than the 180 s .* Raise topup\.maxTimeoutSeconds to at least 340/);
    assert.deepEqual(warningsWith({ firstByte: 180, maxTimeout: 340 }), []);
    assert.deepEqual(warningsWith({ firstByte: 180, upto: false }), [], 'no upto, no warning');
  });
});
