import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config/load.ts';

const withFile = (yaml: string) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-retention-config-'));
  writeFileSync(join(dir, 'tollgate.yaml'), yaml);
  return () => loadConfig({ cwd: dir, env: {} });
};

describe('retention configuration', () => {
  test('off by default; a window set on its own keeps the other defaults', () => {
    assert.equal(withFile('')().retention.enabled, false);
    const r = withFile('retention:\n  enabled: true\n  usageDays: 30\n')().retention;
    assert.deepEqual({ ...r }, { enabled: true, usageDays: 30, reservationDays: 7, exportDir: './usage-archive', batchRows: 500, everySeconds: 60 });
  });

  test('a reservation window longer than the usage window is refused, naming the key', () => {
    assert.throws(withFile('retention:\n  usageDays: 5\n  reservationDays: 6\n'), /retention\.reservationDays must not exceed retention\.usageDays/);
  });

  test('attack: a window of 0 or below, or a fraction of a day, is refused naming the key', () => {
    for (const bad of ['0', '-1', '0.5']) {
      assert.throws(withFile(`retention:\n  enabled: true\n  usageDays: ${bad}\n`), /retention\.usageDays/);
      assert.throws(withFile(`retention:\n  enabled: true\n  reservationDays: ${bad}\n`), /retention\.reservationDays/);
    }
  });
});
