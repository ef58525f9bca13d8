import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { until } from '../../support/until.ts';
import { CHANNEL_CONFIG, channelSuite } from './channel-harness.ts';
import { assertClaimedAsCharged, servedChannel } from './claims-setup.ts';

/** The running gateway's own claimer (services.ts wires it when payPerRequest.batchSettlement is on): a pass a second, any charge due. */
for (const engine of ENGINES) {
  describe(`the gateway's channel claimer (${engine})`, () => {
    const { payPerRequest } = CHANNEL_CONFIG;
    const harness = channelSuite(engine, {
      payPerRequest: { ...payPerRequest, batchSettlement: { ...payPerRequest.batchSettlement, claimIntervalSeconds: 1, claimThresholdUsd: 0.000001 } },
    });

    test('claims and settles a served channel by itself, and counts it in its metrics', async () => {
      const h = harness();
      const { row } = await servedChannel(h);
      const db = h.gw.services.storage.db;
      await until(async () => (await findChannel(db, row.channel_id))!.total_claimed_usdc === row.charged_usdc, 'the gateway claimed the channel', 20_000);
      await assertClaimedAsCharged(h, [row.channel_id]);
      const metrics = await h.gw.services.metrics.registry.metrics();
      assert.match(metrics, /^tollgate_channel_claims_total [1-9]/m);
      assert.match(metrics, new RegExp(`^tollgate_channel_claimed_usdc_total ${row.charged_usdc}$`, 'm'));
      assert.match(metrics, /^tollgate_channel_unclaimed_usdc 0$/m);
      await until(async () => /^tollgate_channel_settles_total [1-9]/m.test(await h.gw.services.metrics.registry.metrics()), 'the gateway settled', 20_000);
      await assertLedgerConsistent(db);
    });
  });
}
