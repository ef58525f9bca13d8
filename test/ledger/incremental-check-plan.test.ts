import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery } from 'kysely';
import { chargedAfter, finishedWithCharges } from '../../src/ledger/checkpoints/incremental-check.ts';
import { sumsPerWallet, usageSumsPerKey } from '../../src/ledger/checkpoints/range-sums.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { seedRequests } from '../support/retention.ts';

/**
 * The incremental ledger-check must read what came after its checkpoint, not history: its query of the
 * requests charged since then is planned on the primary key's range, never on the (kind) index, which
 * walks every charge entry ever made (measured in bench/README.md: 1.78 s per million older requests).
 */
describe('incremental ledger-check: the charges since the checkpoint are read by id range (sqlite)', () => {
  let s: Storage;
  before(async () => {
    s = openStorage(await freshDatabaseUrl('sqlite'));
    await migrateToLatest(s);
    await seedRequests(s, 200, 2, 'plan');
  });
  after(() => s.close());

  const planOf = async (query: { compile(): { sql: string; parameters: readonly unknown[] } }) => {
    const compiled = query.compile();
    const { rows } = await s.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`EXPLAIN QUERY PLAN ${compiled.sql}`, [...compiled.parameters]));
    return rows.map((r) => r.detail).join('\n');
  };

  test('the plan searches ledger_entries by its primary key, not by the kind index', async () => {
    const plan = await planOf(chargedAfter(s.db, 150));
    assert.match(plan, /SEARCH ledger_entries USING INTEGER PRIMARY KEY \(rowid>\?\)/, plan);
    assert.doesNotMatch(plan, /ledger_entries_once/, plan);
  });

  test('it names exactly the requests charged after the entry id', async () => {
    const all = await s.db.selectFrom('ledger_entries').select(['id', 'reference', 'kind']).orderBy('id').execute();
    const cut = Number(all[Math.floor(all.length / 2)]!.id);
    const expected = all.filter((e) => Number(e.id) > cut && e.kind === 'charge').map((e) => e.reference);
    const got = (await chargedAfter(s.db, cut).execute()).map((r) => r.reference);
    assert.ok(expected.length > 0);
    assert.deepEqual(got.sort(), expected.sort());
  });

  test('the sums per wallet and per key after the checkpoint, and its reservations with their charges, read the id range, not an index over all history', async () => {
    const perWallet = await planOf(sumsPerWallet(s.db.selectFrom('ledger_entries').where('id', '>', 150)));
    assert.match(perWallet, /SEARCH ledger_entries USING INTEGER PRIMARY KEY \(rowid>\?\)/, perWallet);
    assert.doesNotMatch(perWallet, /ledger_entries_wallet/, perWallet);
    const perKey = await planOf(usageSumsPerKey(s.db.selectFrom('request_usage').where('id', '>', 150)));
    assert.match(perKey, /SEARCH request_usage USING INTEGER PRIMARY KEY \(rowid>\?\)/, perKey);
    assert.doesNotMatch(perKey, /request_usage_key/, perKey);
    const charges = await planOf(finishedWithCharges(s.db).where('r.id', '>', 150));
    assert.match(charges, /SEARCH r USING INTEGER PRIMARY KEY \(rowid>\?\)\n.*SEARCH e USING INDEX ledger_entries_once \(kind=\? AND reference=\?\)/, charges);
  });

  test('the sums per wallet and per key equal the plain GROUP BY over the same range', async () => {
    const wallets = await sumsPerWallet(s.db.selectFrom('ledger_entries').where('id', '>', 150)).execute();
    const plain = await s.db
      .selectFrom('ledger_entries')
      .where('id', '>', 150)
      .select(['wallet', (eb) => eb.fn.sum<number>('amount_usdc').as('sum')])
      .groupBy('wallet')
      .execute();
    const byWallet = (rows: Array<{ wallet: string; sum: unknown }>) => rows.map((r) => `${r.wallet} ${Number(r.sum)}`).sort();
    assert.deepEqual(byWallet(wallets), byWallet(plain));
    assert.ok(wallets.length > 0);
    const keys = await usageSumsPerKey(s.db.selectFrom('request_usage').where('id', '>', 150)).execute();
    assert.deepEqual(keys.map((k) => Number(k.api_key_id)).sort(), [1, 2]);
  });
});
