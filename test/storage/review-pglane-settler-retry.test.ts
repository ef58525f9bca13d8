import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { sql } from 'kysely';
import { getBalance } from '../../src/ledger/balances.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { createDurableSettler } from '../../src/ledger/spool/durable-settle.ts';
import { SettleSpool } from '../../src/ledger/spool/spool-file.ts';
import { CommitOutcomeUnknown } from '../../src/storage/commit-outcome.ts';
import type { Storage } from '../../src/storage/database.ts';
import { laneCutProxy, ledgerWithUnlimitedKey } from '../support/cut-lane-proxy.ts';
import { tempDir } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

const CHARGE = 7;
const REQUESTS = 200;
type CutAt = Parameters<typeof laneCutProxy>[2];
/** Where the server's answers are cut: across the batches' answers, past the start-up, and right behind a COMMIT. */
const CUTS: CutAt[] = [
  ...[1_500, 3_000, 6_000, 10_000, 15_000].map((answerBytes) => ({ answerBytes })),
  ...[1, 3, 5, 6, 7, 8].map((commitsSent) => ({ commitsSent })),
];

/**
 * The durable settler over a lane whose connection is cut while its settles are on the wire, through a proxy
 * that lets the server commit everything it was sent: some settles committed with their callers told the
 * outcome is unknown. The settler's retry must find them billed, on the finish path (a withheld answer) and on
 * the late-charge path (a delivered answer whose reservation the sweeper had already voided): each request
 * charged exactly once, one usage row each, and the books balanced.
 */
describe('attack: the settler retries settles whose first attempt committed unseen', () => {
  let url: string;
  let s: Storage;
  before(async () => {
    ({ url, s } = await ledgerWithUnlimitedKey());
  });
  after(() => s.close());

  const id = () => `settle-${randomBytes(6).toString('hex')}`;

  async function settleThroughCut(late: boolean, cutAt: CutAt): Promise<{ toldUnknown: number }> {
    const wallet = await fundedWallet(s.db, 1_000_000);
    const requests: string[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const requestId = id();
      assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId, amountUsdc: 10, leaseMs: late ? 1 : 60_000 }), true);
      requests.push(requestId);
    }
    // The late path: the sweeper voided every reservation before its answer was billed.
    if (late) while ((await sweepExpiredReservations(s.db, Date.now() + 5_000)) > 0);
    const lane = await laneCutProxy(url, s.db, cutAt);
    const unknown = new Set<string>();
    const storage: Storage = {
      ...lane.storage,
      writeUnit: (unit, opts) =>
        lane.storage.writeUnit(unit, opts).catch((err: unknown) => {
          if (err instanceof CommitOutcomeUnknown) unknown.add('x');
          throw err;
        }),
    };
    try {
      const settler = createDurableSettler({
        storage,
        spool: SettleSpool.open(tempDir(), 'pglane-retry'),
        logger: pino({ level: 'silent' }),
        failure: () => null,
        onApplied: () => undefined,
        onUnbilled: () => undefined,
      });
      const outcomes = await Promise.all(
        requests.map((requestId) => settler.settle({ requestId, wallet, chargeUsdc: CHARGE, usage: usageRecord(requestId, wallet) }, { lateIfReleased: late })),
      );
      await settler.replay();
      assert.deepEqual(
        outcomes.filter((o) => !o.applied || o.chargedUsdc !== CHARGE),
        [],
        'every caller told its request was charged once',
      );
      const usage = await s.db.selectFrom('request_usage').select(sql<number>`count(*)`.as('n')).where('wallet', '=', wallet).executeTakeFirstOrThrow();
      assert.equal(Number(usage.n), REQUESTS, 'one usage row a request');
      const charges = await s.db
        .selectFrom('ledger_entries')
        .select(sql<number>`count(*)`.as('n'))
        .where('wallet', '=', wallet)
        .where('kind', '=', 'charge')
        .executeTakeFirstOrThrow();
      assert.equal(Number(charges.n), REQUESTS, 'one charge entry a request');
      const left = 1_000_000 - REQUESTS * CHARGE;
      assert.deepEqual(await getBalance(s.db, wallet), { balance_usdc: left, locked_usdc: 0, available_usdc: left });
      await assertLedgerConsistent(s.db);
      // A cut behind the n-th COMMIT may find fewer COMMITs: how the backlog forms batches depends on the machine's pace.
      return { toldUnknown: unknown.size };
    } finally {
      await lane.close();
    }
  }

  for (const late of [false, true]) {
    test(`${late ? 'late charges of voided reservations' : 'finishes of pending reservations'}, cut at ${CUTS.length} points`, async () => {
      let unknownSeen = 0;
      for (const cutAt of CUTS) unknownSeen += (await settleThroughCut(late, cutAt)).toldUnknown;
      assert.ok(unknownSeen > 0, 'driven: some settle was told its outcome is unknown');
    });
  }
});
