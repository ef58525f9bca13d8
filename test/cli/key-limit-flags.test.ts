import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { runTollgate } from '../support/cli.ts';
import { tempDir } from '../support/engines.ts';

// The limit flags of `tollgate wallet keys create|update` and `tollgate admin keys limit` are refused
// in the flags' own words: the API's words ("spend_limit_usdc …, or null to remove the limit") name
// fields the user never typed and advise a value (null) the flags refuse.
const cases: Array<[string[], RegExp]> = [
  [['--limit-usd', '0'], /^tollgate: --limit-usd must be more than 0, such as 5 or 0\.25, or "none" to remove the limit; got "0"\n$/],
  [['--limit-usd=-1'], /^tollgate: --limit-usd must be more than 0, such as 5 or 0\.25, or "none" to remove the limit; got "-1"\n$/],
  [['--period', 'week'], /^tollgate: --period must be total, day or month \(UTC\); got "week"\n$/],
  [['--models', ','], /^tollgate: --models must name at least one model id \(see GET \/v1\/models\), or be "all" to allow every model\n$/],
  [
    ['--expires', 'tomorrow'],
    /^tollgate: --expires must be an ISO 8601 time such as 2030-01-31T00:00:00Z \(a date alone is UTC midnight\), or "never" to remove the expiry; got "tomorrow"\n$/,
  ],
];

describe('key limit flags: refused in the words of the flags', () => {
  let config: string;
  before(() => {
    const dir = tempDir();
    config = join(dir, 'tollgate.yaml');
    writeFileSync(config, `database:\n  url: sqlite:${join(dir, 'tollgate.db')}\n`);
  });

  for (const [flags, expected] of cases) {
    test(`${flags.join(' ')}: wallet keys update, wallet keys create and admin keys limit, exit 2`, async () => {
      for (const args of [
        ['wallet', 'keys', 'update', '1', ...flags],
        ['wallet', 'keys', 'create', ...flags],
        ['--config', config, 'admin', 'keys', 'limit', '1', ...flags],
      ]) {
        const res = await runTollgate(args);
        assert.equal(res.code, 2, `${args.join(' ')}: ${res.stderr}`);
        assert.match(res.stderr, expected, args.join(' '));
      }
    });
  }
});
