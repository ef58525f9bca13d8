import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';
import { configSchema } from '../../src/config/schema.ts';

/**
 * The configuration an empty file yields, frozen in fixtures/empty-config.json (written from the
 * schema's `.default({...})` sections, which its `.prefault({})` sections must reproduce),
 * so a reshaped schema cannot change a default unnoticed. `source` is where the file was (a temp
 * folder here), so it is left out. JSON on both sides: what is compared is values, not key order.
 */
const EXPECTED = JSON.parse(readFileSync(new URL('fixtures/empty-config.json', import.meta.url), 'utf8')) as Record<string, unknown>;

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

describe('configuration defaults', () => {
  test('an empty file yields exactly the recorded default configuration', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-defaults-'));
    writeFileSync(join(dir, 'tollgate.yaml'), '');
    const { source, ...config } = loadConfig({ cwd: dir, env: {} });
    assert.equal(source, join(dir, 'tollgate.yaml'));
    assert.deepEqual(JSON.parse(JSON.stringify(config)), EXPECTED);
  });

  // A section left out must get the same values as the section written empty: both come from the
  // section's inner defaults. This fails on a section default that repeats (and drifts from) them.
  test('every section left out equals the same section written as {}', () => {
    const empty = configSchema.parse({}) as Record<string, unknown>;
    const sections = Object.keys(empty).filter((k) => isPlainObject(empty[k]));
    assert.ok(sections.length >= 10, `the schema has its object sections (${sections.join(', ')})`);
    for (const k of sections) assert.deepEqual((configSchema.parse({ [k]: {} }) as Record<string, unknown>)[k], empty[k], k);
    assert.deepEqual(configSchema.parse({ topup: { relayer: {} } }).topup.relayer, configSchema.parse({}).topup.relayer, 'topup.relayer');
  });

  test('a section given in part keeps the defaults of the keys it leaves out', () => {
    const c = configSchema.parse({
      chat: { defaultMaxTokens: 5 },
      siwe: { windowSeconds: 60 },
      keys: { maxActivePerWallet: 3 },
      database: { urlEnv: 'DB_URL' },
    });
    assert.equal(c.chat.reservationLeaseSeconds, 600);
    assert.equal(c.chat.drainTimeoutSeconds, 120);
    assert.deepEqual(c.siwe.chainIds, [1, 8453, 84532]);
    assert.equal(c.siwe.clockSkewSeconds, 60);
    assert.equal(c.keys.lookupCacheSeconds, 2);
    assert.equal(c.database.url, 'sqlite:./data/tollgate.db');
  });
});
