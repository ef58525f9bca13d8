// biome-ignore-all lint/suspicious/noTemplateCurlyInString: the strings are source text fed to the money-writer scanner, placeholders included
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findMoneyWriters, isAllowed, moneyWritesIn } from '../../scripts/money-writers.mjs';

describe('money tables are written only from src/ledger/', () => {
  test('no file outside src/ledger/ (and the migrations) writes a money table', () => {
    assert.deepEqual(findMoneyWriters(), []);
  });

  test('the check sees a planted write of each kind, so it can fail', () => {
    const planted = [
      "await db.updateTable('wallets').set({ balance_usdc: 0 }).execute();",
      "await trx.insertInto('ledger_entries as e').values(row).execute();",
      'await db.deleteFrom(`key_spend`).execute();',
      "const CLOSE = 'UPDATE reservations SET status = ? WHERE request_id = ?';",
      'const ADD = `insert into usage_totals (api_key_id) values (${id})`;',
      'await sql`delete   from\n usage_daily where day < ${day}`.execute(db);',
      "const ROW = 'INSERT OR IGNORE INTO request_usage (request_id) VALUES (?)';",
    ].join('\n');
    const found = moneyWritesIn('src/keys/planted.ts', planted);
    assert.deepEqual(
      found.map((f) => [f.line, f.table]),
      [
        [1, 'wallets'],
        [2, 'ledger_entries'],
        [3, 'key_spend'],
        [4, 'reservations'],
        [5, 'usage_totals'],
        [6, 'usage_daily'],
        [8, 'request_usage'],
      ],
    );
    assert.equal(isAllowed('src/keys/planted.ts'), false);
  });

  test('reads, comments, other tables and the allowed folders are not violations', () => {
    const harmless = [
      '// UPDATE wallets SET balance_usdc = 0 is what a refund would do',
      "await db.selectFrom('wallets').selectAll().execute();",
      "await db.updateTable('api_keys').set({ revoked_at: 1 }).execute();",
      "const Q = 'SELECT * FROM reservations WHERE status = ?';",
      "const U = 'UPDATE reservations_archive SET x = 1';",
    ].join('\n');
    assert.deepEqual(moneyWritesIn('src/keys/harmless.ts', harmless), []);
    assert.equal(isAllowed('src/ledger/effects/wallet.ts'), true);
    assert.equal(isAllowed('src/storage/migrations/004-usage-totals.ts'), true);
    assert.equal(isAllowed('src/storage/database.ts'), false);
  });
});
