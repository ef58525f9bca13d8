import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { tempDir } from '../support/engines.ts';
import { startTestGateway } from '../support/gateway.ts';
import { until } from '../support/until.ts';
import { DAY, exportedIds, seedRequests } from '../support/retention.ts';

describe('retention job in a running gateway (sqlite)', () => {
  test('with retention.enabled the gateway removes checkpointed old rows by itself, exported first, the ledger still sound', async () => {
    const exportDir = join(tempDir(), 'archive');
    const later = Date.now() + 10 * DAY;
    const retention = { enabled: true, usageDays: 2, reservationDays: 1, everySeconds: 1, exportDir };
    const gw = await startTestGateway({ engine: 'sqlite', now: () => later, config: { retention } });
    try {
      const s = gw.services.storage;
      await seedRequests(s, 120, 2, 'job');
      await runLedgerCheck(s.db, { full: false, now: later });
      const left = async () =>
        Number(
          (
            await s.db
              .selectFrom('request_usage')
              .select((eb) => eb.fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      await until(async () => (await left()) === 0, 'the usage rows removed by the job', 20_000);
      assert.equal(new Set(exportedIds(exportDir)).size, 120);
      assert.match(gw.logs(), /retention removed old rows/);
      assert.deepEqual((await runLedgerCheck(s.db, { full: true })).problems, []);
    } finally {
      await gw.stop();
    }
  });
});
