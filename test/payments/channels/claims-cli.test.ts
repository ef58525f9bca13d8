import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { stringify } from 'yaml';
import { CLAIM_LEASE } from '../../../src/payments/channels/claims/claim-pass.ts';
import { holdLease, releaseLease } from '../../../src/retention/job-lease.ts';
import { runTollgate } from '../../support/cli.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { CHANNEL_CONFIG } from './channel-harness.ts';
import { assertClaimedAsCharged, claimsSuite, servedChannel } from './claims-setup.ts';

/** `tollgate admin channels [--claim]` as an operator runs it, against the database and chain of a running gateway. */
for (const engine of ENGINES) {
  describe(`tollgate admin channels (${engine})`, () => {
    const harness = claimsSuite(engine);

    test('lists a channel with its unclaimed charges; --claim refuses while another claimer holds the lease, then claims and settles', async () => {
      const h = harness();
      const dir = mkdtempSync(join(tmpdir(), 'tollgate-channels-cli-'));
      try {
        const file = join(dir, 'tollgate.yaml');
        writeFileSync(file, stringify({ ...h.gatewayConfig, payPerRequest: CHANNEL_CONFIG.payPerRequest, database: { url: h.gw.config.database.url } }));
        const env = { ...h.env, TOLLGATE_CONFIG: file };
        const { account, row } = await servedChannel(h);

        const listed = await runTollgate(['admin', 'channels'], env);
        assert.equal(listed.code, 0, listed.stdout + listed.stderr);
        const line = `${row.channel_id} payer ${account.address.toLowerCase()} charged ${row.charged_usdc} claimed 0 unclaimed ${row.charged_usdc} `;
        assert.ok(listed.stdout.includes(line), listed.stdout);
        assert.match(listed.stdout, /withdrawal none/);

        const db = h.gw.services.storage.db;
        assert.ok(await holdLease(db, CLAIM_LEASE, 'another-instance', Date.now(), 60_000));
        const refused = await runTollgate(['admin', 'channels', '--claim'], env);
        assert.equal(refused.code, 2, refused.stdout + refused.stderr);
        assert.match(refused.stderr, /another instance's claimer holds the lease/);
        await releaseLease(db, CLAIM_LEASE, 'another-instance');

        const claimed = await runTollgate(['admin', 'channels', '--claim'], env);
        assert.equal(claimed.code, 0, claimed.stdout + claimed.stderr);
        assert.match(claimed.stdout, /claimed 1 channels in 0x[0-9a-f]{64}/);
        assert.match(claimed.stdout, /settled to the receiver in 0x[0-9a-f]{64}/);
        assert.ok(claimed.stdout.includes(`claimed ${row.charged_usdc} unclaimed 0 `), claimed.stdout);
        await assertClaimedAsCharged(h, [row.channel_id]);
        await assertLedgerConsistent(db);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
