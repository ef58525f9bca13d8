import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';

/**
 * The Node version the README asks for is one that every package of `npm install` (the root lock,
 * the user's install; the test clients have their own) declares it runs on, so a user on that
 * version sees no EBADENGINE warning. npm compares each package's `engines.node` with the running
 * Node; the oldest version the README allows is the one to check.
 */

const ROOT = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, ROOT), 'utf8');
// semver is npm's own range matcher, installed with the gateway's dependencies (it has no types here).
const semver = createRequire(import.meta.url)('semver') as { satisfies(version: string, range: string): boolean };

describe("the README's Node version and the install's engines", () => {
  const readmeVersion = /You need Node\.js (\d+\.\d+) or newer/.exec(read('README.md'))?.[1];
  const pkg = JSON.parse(read('package.json')) as { engines: { node: string } };
  const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { version?: string; engines?: { node?: string } }> };

  test('package.json declares the version the README names', () => {
    assert.ok(readmeVersion, 'the README says "You need Node.js X.Y or newer"');
    assert.equal(pkg.engines.node, `>=${readmeVersion}`);
    assert.equal(lock.packages['']?.engines?.node, pkg.engines.node, 'package-lock.json has the same engines as package.json');
  });

  test('every package of the install runs on that version (no EBADENGINE on npm install)', () => {
    const oldest = `${readmeVersion}.0`;
    const refusing = Object.entries(lock.packages)
      .filter(([path, meta]) => path !== '' && meta.engines?.node && !semver.satisfies(oldest, meta.engines.node))
      .map(([path, meta]) => `${path.replace(/^.*node_modules\//, '')}@${meta.version} wants node ${meta.engines!.node}`);
    assert.deepEqual(refusing, [], `on Node ${oldest}`);
  });
});
