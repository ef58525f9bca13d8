import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { creditPayment, findPayment, releaseUnsent } from '../../src/payments/payment-store.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { runTollgate } from '../support/cli.ts';
import { ENGINES, freshDatabaseUrl, tempDir } from '../support/engines.ts';
import { randomTx, recordedPayment } from '../support/payment-rows.ts';

/**
 * `tollgate admin ledger-check` holds every payment's state to its ledger entries and to the
 * columns that project it: each corruption below is a row a defect (or a hand edit) could leave.
 */
for (const engine of ENGINES) {
  describe(`ledger-check: payment states against the ledger (${engine})`, () => {
    let s: Storage;
    let url: string;
    let credited: string;
    let released: string;
    let pending: string;
    before(async () => {
      url = await freshDatabaseUrl(engine);
      s = openStorage(url);
      await migrateToLatest(s);
      credited = await recordedPayment(s.db);
      await creditPayment(s.db, credited, randomTx(), 1_000_000n);
      released = await recordedPayment(s.db);
      await releaseUnsent(s.db, await findPayment(s.db, released));
      pending = await recordedPayment(s.db);
    });
    after(() => s.close());

    const corrupt = async (id: string, set: Record<string, unknown>) => {
      const before = await findPayment(s.db, id);
      await s.db.updateTable('payments').set(set).where('id', '=', id).execute();
      const { problems } = await checkLedger(s.db);
      await s.db
        .updateTable('payments')
        .set({ state: before.state, status: before.status, upto_state: before.upto_state, release_kind: before.release_kind })
        .where('id', '=', id)
        .execute();
      return problems;
    };

    test('the books of a credited, a released and a pending payment pass', async () => {
      assert.deepEqual((await checkLedger(s.db)).problems, []);
    });

    test('a credited payment whose state says failed: its credit is one too many, and its status disagrees', async () => {
      const problems = await corrupt(credited, { state: 'failed' });
      assert.ok(problems.includes(`payment ${credited} (failed): 1 top-up credits, expected 0`), problems.join('\n'));
      assert.ok(
        problems.some((p) => p.startsWith(`payment ${credited} is failed but its status/upto_state read credited/null`)),
        problems.join('\n'),
      );
    });

    test('a payment marked credited (state and status) with no credit behind it', async () => {
      const problems = await corrupt(pending, { state: 'credited', status: 'credited' });
      assert.ok(problems.includes(`payment ${pending} (credited): 0 top-up credits, expected 1`), problems.join('\n'));
    });

    test('a released payment without its release kind, and a failed one with one', async () => {
      assert.ok((await corrupt(released, { release_kind: null })).some((p) => p.startsWith(`payment ${released} is released with release kind none`)));
      const failed = await corrupt(released, { state: 'failed' });
      assert.ok(
        failed.some((p) => p.startsWith(`payment ${released} is failed with release kind never_sent`)),
        failed.join('\n'),
      );
    });

    test('the command exits 1 and names the payment', async () => {
      await s.db.updateTable('payments').set({ state: 'holding' }).where('id', '=', pending).execute();
      try {
        const configPath = join(tempDir(), 'tollgate.yaml');
        writeFileSync(configPath, `database:\n  url: "${url}"\nserver:\n  publicUrl: http://gateway.test\n`);
        const cli = await runTollgate(['--config', configPath, 'admin', 'ledger-check']);
        assert.equal(cli.code, 1, cli.stdout + cli.stderr);
        assert.match(cli.stdout, new RegExp(`ledger check FAILED:[\\s\\S]*payment ${pending} is holding but its status/upto_state read pending/null`));
      } finally {
        await s.db.updateTable('payments').set({ state: 'pending' }).where('id', '=', pending).execute();
      }
    });
  });
}
