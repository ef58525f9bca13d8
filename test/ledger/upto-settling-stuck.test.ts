import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { UPTO_SETTLE_STUCK_MS } from '../../src/ledger/upto-check.ts';
import type { Facilitator } from '../../src/payments/facilitator/facilitator.ts';
import { reconcileUpto } from '../../src/payments/upto/reconcile-upto.ts';
import { closeSettled, fixCharge, holdMaximum } from '../../src/payments/upto/upto-store.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { PAYLOAD, pendingUpto, spend } from '../support/upto-hold-fixtures.ts';

/**
 * An upto settle nobody finishes (its transaction unmined and unreplaced, the reconciler unable to
 * read the chain, no gateway running) leaves the payer 409 UPTO_BUSY and the charge uncollected.
 * The operator must be able to see it: a payment `settling` untouched for UPTO_SETTLE_STUCK_MS is a
 * `ledger-check` finding, and each reconciler pass sets tollgate_upto_settles_stuck to how many
 * there are (back to 0 once they are finished). Driven on the store directly: no chain, the RPC
 * reads as down (no client for the network), so the pass can finish nothing.
 */
const CHARGE = 250;

/** An upto payment whose charge was fixed (settling) at `fixedAt`, and its payer. */
async function settlingSince(s: Storage, fixedAt: number): Promise<{ id: string; payer: string }> {
  const p = await pendingUpto(s);
  assert.equal((await holdMaximum(s.db, p.id, PAYLOAD, fixedAt)).kind, 'held');
  await spend(s, p.payer, CHARGE);
  assert.equal(await fixCharge(s.db, p.id, fixedAt), 'fixed');
  return p;
}

/** One reconciler pass with the chain unreadable; the counts it reported as stuck. */
async function passReportingStuck(s: Storage): Promise<number[]> {
  const reported: number[] = [];
  const quiet = { info() {}, warn() {} };
  await reconcileUpto({
    db: s.db,
    // Never reached: with no client for the network, nothing is read or sent.
    facilitator: {} as Facilitator,
    clientFor: () => undefined,
    logger: quiet,
    countUnsettled: () => assert.fail('nothing may be recorded unsettled while the chain cannot be read'),
    now: Date.now,
    staleMs: 0,
    metrics: { resent: () => assert.fail('nothing may be sent'), stuck: (n) => reported.push(n) },
  });
  return reported;
}

const findingsAbout = async (s: Storage, id: string) => (await checkLedger(s.db)).findings.filter((f) => f.includes(`upto payment ${id}`));

for (const engine of ENGINES) {
  describe(`attack: an upto settle left settling is shown to the operator (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('settling past 10 minutes: a ledger-check finding and tollgate_upto_settles_stuck; a recent settle is neither; finished: 0 again', async () => {
      const stuck = await settlingSince(s, Date.now() - UPTO_SETTLE_STUCK_MS - 60_000);
      const recent = await settlingSince(s, Date.now() - 60_000);

      const [finding, ...more] = await findingsAbout(s, stuck.id);
      assert.equal(more.length, 0);
      assert.match(finding ?? '', new RegExp(`^upto payment ${stuck.id} \\(wallet ${stuck.payer}\\): charged ${CHARGE} micro-USDC, settling since `));
      assert.match(finding ?? '', /sends it again if it was dropped, and records it unsettled past its deadline/);
      assert.deepEqual(await findingsAbout(s, recent.id), [], 'a settle fixed a minute ago is not stuck');
      assert.deepEqual(await passReportingStuck(s), [1]);

      await closeSettled(s.db, stuck.id, BigInt(CHARGE), `0x${'ab'.repeat(32)}`);
      assert.deepEqual(await findingsAbout(s, stuck.id), []);
      assert.deepEqual(await passReportingStuck(s), [0], 'the gauge goes back to 0');
      await assertLedgerConsistent(s.db);
    });
  });
}
