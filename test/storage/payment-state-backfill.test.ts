import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { paymentStateProblems } from '../../src/ledger/payment-state-check.ts';
import { RELEASED_DROPPED, RELEASED_UNSENT, UNAVAILABLE_DURING_SETTLE, UNAVAILABLE_DURING_VERIFY } from '../../src/payments/payment-store.ts';
import { REFUSED_UNSENT } from '../../src/payments/settle-topup.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateTo, migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { insertPaymentBefore014 } from '../support/payment-rows.ts';

/** Rows as the columns before migration 014 held their state: [status, upto_state, failure_reason] and the state expected after. */
const OLD_ROWS: { id: string; status: string; upto: string | null; reason: string | null; state: string; release: string | null }[] = [
  { id: 'pending', status: 'pending', upto: null, reason: null, state: 'pending', release: null },
  { id: 'submitted', status: 'submitted', upto: null, reason: null, state: 'submitted', release: null },
  { id: 'credited', status: 'credited', upto: null, reason: null, state: 'credited', release: null },
  { id: 'failed-payer', status: 'failed', upto: null, reason: 'transfer amount exceeds balance', state: 'failed', release: null },
  { id: 'failed-refused', status: 'failed', upto: null, reason: REFUSED_UNSENT, state: 'failed', release: null },
  { id: 'released-unsent', status: 'failed', upto: null, reason: RELEASED_UNSENT, state: 'released', release: 'never_sent' },
  { id: 'released-dropped', status: 'failed', upto: null, reason: RELEASED_DROPPED, state: 'released', release: 'dropped' },
  { id: 'released-verify', status: 'failed', upto: null, reason: UNAVAILABLE_DURING_VERIFY, state: 'released', release: 'unavailable' },
  { id: 'released-settle', status: 'failed', upto: null, reason: UNAVAILABLE_DURING_SETTLE, state: 'released', release: 'unavailable' },
  { id: 'upto-holding', status: 'credited', upto: 'holding', reason: null, state: 'holding', release: null },
  { id: 'upto-settling', status: 'credited', upto: 'settling', reason: null, state: 'settling', release: null },
  { id: 'upto-settled', status: 'credited', upto: 'settled', reason: null, state: 'settled', release: null },
  { id: 'upto-unsettled', status: 'credited', upto: 'unsettled', reason: 'facilitator unavailable during settle', state: 'unsettled', release: null },
  { id: 'upto-written-off', status: 'credited', upto: 'written_off', reason: 'written off: lost', state: 'written_off', release: null },
];

async function insertOldRows(db: Kysely<any>): Promise<void> {
  const now = Date.now();
  for (const [i, r] of OLD_ROWS.entries()) {
    // One open upto payment per payer (migration 013's index): each row has a payer of its own.
    const payer = `0x${i.toString(16).padStart(40, '0')}`;
    await insertPaymentBefore014(db, { ...r, payer, createdAt: now + i, creditedAt: r.status === 'credited' ? now : null });
  }
}

for (const engine of ENGINES) {
  describe(`migration 014 back-fills each payment's state (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateTo(s, '013-upto-payments');
      await insertOldRows(s.db);
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('a row in each old state gets its state, and released only from the texts that meant it', async () => {
      const rows = await s.db.selectFrom('payments').select(['id', 'state', 'release_kind', 'status', 'upto_state', 'failure_reason']).execute();
      const got = Object.fromEntries(rows.map((r) => [r.id, [r.state, r.release_kind]]));
      assert.deepEqual(got, Object.fromEntries(OLD_ROWS.map((r) => [r.id, [r.state, r.release]])));
      // The human text and the projections are untouched.
      for (const r of OLD_ROWS) {
        const row = rows.find((x) => x.id === r.id)!;
        assert.deepEqual([row.status, row.upto_state, row.failure_reason], [r.status, r.upto, r.reason]);
      }
      assert.deepEqual(await paymentStateProblems(s.db), []);
    });

    test('the columns refuse a state and a release kind the machine does not know', async () => {
      await assert.rejects(
        s.db
          .updateTable('payments')
          .set({ state: 'lost' as never })
          .where('id', '=', 'pending')
          .execute(),
      );
      await assert.rejects(
        s.db
          .updateTable('payments')
          .set({ release_kind: 'bored' as never })
          .where('id', '=', 'released-unsent')
          .execute(),
      );
    });
  });
}
