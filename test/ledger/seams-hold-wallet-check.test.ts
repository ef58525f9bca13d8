import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { channelProblems } from '../../src/ledger/channel-check.ts';
import { uptoProblems } from '../../src/ledger/upto-check.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import type { LedgerEntryTable } from '../../src/storage/schema.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';

/**
 * The stray-entry lines of the channel and upto hold checks (one shared rule, hold-wallet-check.ts):
 * an entry of the hold's own kinds in no owner's hold wallet, a credit into a hold wallet other
 * than by a hold, a debit out of one other than by a charge or a release. Each written straight
 * into ledger_entries, as a bug or a hand with database access would, and each named.
 */
for (const engine of ENGINES) {
  describe(`attack: money into or out of a hold wallet by no hold operation (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    /** A hold wallet's row, as its first hold would create it: the entries below need one. */
    const holdWallet = async (suffix: string) => {
      const address = `0x${randomUUID().replaceAll('-', '')}${suffix}`;
      await s.db.insertInto('wallets').values({ address, balance_usdc: 0, locked_usdc: 0, created_at: Date.now(), updated_at: Date.now() }).execute();
      return address;
    };
    const entry = (wallet: string, kind: LedgerEntryTable['kind'], amount: number, reference: string | null = null) =>
      s.db.insertInto('ledger_entries').values({ wallet, kind, amount_usdc: amount, reference, note: 'tampered', created_at: Date.now() }).execute();

    const cases = [
      {
        name: 'a channel hold wallet',
        suffix: '#channel',
        hold: ['channel_hold', `channel-request:${randomUUID()}`] as const,
        check: channelProblems,
        other: uptoProblems,
        lines: [
          "1 channel hold or release entries belong to no channel's hold wallet",
          '1 credits entered a channel hold wallet other than by a hold',
          "1 debits left a channel hold wallet other than by a request's charge or a release",
        ],
      },
      {
        name: 'an upto hold wallet',
        suffix: '#upto',
        hold: ['upto_hold', `payment:${randomUUID()}`] as const,
        check: uptoProblems,
        other: channelProblems,
        lines: [
          '1 credits entered an upto hold wallet other than by a hold',
          "1 debits left an upto hold wallet other than by a request's charge or a release",
          "1 upto hold or release entries belong to no upto payment's hold wallet",
        ],
      },
    ];
    for (const c of cases) {
      test(`${c.name}: a hold of no owner, a credit, a debit with no reference: one line each, and none in the other check`, async () => {
        const before = (await c.other(s.db)).problems;
        const wallet = await holdWallet(c.suffix);
        await entry(wallet, c.hold[0], 5, c.hold[1]);
        await entry(wallet, 'adjustment', 3);
        await entry(wallet, 'adjustment', -2);
        assert.deepEqual((await c.check(s.db)).problems.sort(), c.lines);
        assert.deepEqual((await c.other(s.db)).problems, before);
      });
    }
  });
}
