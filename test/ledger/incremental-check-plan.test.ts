import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery } from 'kysely';
import { chargedAfter } from '../../src/ledger/checkpoints/incremental-check.ts';
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

  test('the plan searches ledger_entries by its primary key, not by the kind index', async () => {
    const compiled = chargedAfter(s.db, 150).compile();
    const { rows } = await s.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`EXPLAIN QUERY PLAN ${compiled.sql}`, [...compiled.parameters]));
    const plan = rows.map((r) => r.detail).join('\n');
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
});
