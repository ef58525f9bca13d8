import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createPublicClient, http, type Hex, type PublicClient } from 'viem';
import { FacilitatorUnavailable, type Facilitator } from '../../../src/payments/facilitator/facilitator.ts';
import { findChannel } from '../../../src/payments/channels/channel-store.ts';
import { CLAIM_LEASE, runClaimPass } from '../../../src/payments/channels/claims/claim-pass.ts';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { releaseLease } from '../../../src/retention/job-lease.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { assertClaimedAsCharged, claimsSuite, claimDeps, claimPass, gasOf, HOLDER, payerCalls, reader, servedChannel } from './claims-setup.ts';

/**
 * The background claimer (src/payments/channels/claims/) on real anvil with the stock client's
 * channels: many channels in one claimWithSignature, the settle to the receiver, a payer's timed
 * withdrawal, outages and a crash mid-claim, two instances. After each, the chain equals the
 * gateway's mirror and the ledger's invariants hold.
 */
for (const engine of ENGINES) {
  describe(`batch-settlement channel claims (${engine})`, () => {
    const harness = claimsSuite(engine);

    test('three channels after their requests: one claimWithSignature covers them all, one settle pays the receiver', async () => {
      const h = harness();
      const served = [await servedChannel(h), await servedChannel(h), await servedChannel(h)];
      const ids = served.map((s) => s.row.channel_id);
      const charged = served.reduce((sum, s) => sum + s.row.charged_usdc, 0);

      const early = await claimPass(h);
      assert.equal(early.ran, true);
      assert.deepEqual(early.claims, [], 'below claimThresholdUsd and younger than claimMaxAgeSeconds: not claimed yet');

      const receiverBefore = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
      const later = await claimPass(h, { now: () => Date.now() + 3_601_000 });
      assert.equal(later.claims.length, 1, 'one transaction');
      assert.deepEqual([...later.claims[0]!.channels].sort(), [...ids].sort(), 'covering the three channels');
      assert.equal(later.settles.length, 1);
      assert.deepEqual(later.failures, []);
      await assertClaimedAsCharged(h, ids);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, h.payTo.address), receiverBefore + BigInt(charged), 'the receiver got exactly the charges');
      const transfers = await h.gw.services.storage.db.selectFrom('channel_transfers').selectAll().where('kind', 'in', ['claim', 'settle']).execute();
      assert.equal(transfers.filter((t) => t.kind === 'claim' && ids.includes(t.channel_id)).length, 3, 'each channel records the claim');
      assert.equal(transfers.filter((t) => t.kind === 'settle').length, 1);

      const again = await claimPass(h, { now: () => Date.now() + 7_200_000 });
      assert.deepEqual([again.claims, again.settles], [[], []], 'nothing is claimed or settled twice');
      await assertLedgerConsistent(h.gw.services.storage.db);

      const claimGas = await gasOf(h, later.claims[0]!.transaction);
      const settleGas = await gasOf(h, later.settles[0]!);
      const deposit =
        transfers.length &&
        (await h.gw.services.storage.db
          .selectFrom('channel_transfers')
          .select('tx_hash')
          .where('kind', '=', 'deposit')
          .where('channel_id', '=', ids[0]!)
          .executeTakeFirstOrThrow());
      const depositGas = deposit ? await gasOf(h, deposit.tx_hash) : 0n;
      console.log(`gas: deposit ${depositGas}, claim of 3 channels ${claimGas}, settle ${settleGas}`);
    });

    test("attack: a payer's withdrawal started mid-session: every request served is claimed before it completes", async () => {
      const h = harness();
      const { account, row, chat } = await servedChannel(h);
      const chain = await readOnchainChannel(reader(h), row.channel_id as Hex);
      await payerCalls(h, account, row, 'initiateWithdraw', [chain.balance - chain.totalClaimed]);
      await chat();
      const pass = await claimPass(h);
      const after = (await findChannel(h.gw.services.storage.db, row.channel_id))!;
      assert.ok(after.withdraw_requested_at > 0, 'the withdrawal is mirrored');
      assert.ok(after.charged_usdc > row.charged_usdc, 'the request after the withdrawal started was served');
      assert.ok(
        pass.claims.some((c) => c.channels.includes(row.channel_id)),
        'claimed at once, below the threshold: a withdrawal is under way',
      );
      await assertClaimedAsCharged(h, [row.channel_id]);

      // The chain's clock moves past the delay for the payer's finalize, and back after it: the
      // stock client's deposit authorizations are dated by the wall clock.
      const snapshot = await h.anvil.rpc('evm_snapshot', []);
      await h.anvil.rpc('evm_increaseTime', [901]);
      await h.anvil.rpc('evm_mine', []);
      try {
        const walletBefore = await h.chain.balanceOf(h.chain.usdc, account.address);
        await payerCalls(h, account, row, 'finalizeWithdraw');
        const deposited = BigInt(after.deposited_usdc);
        assert.equal(
          await h.chain.balanceOf(h.chain.usdc, account.address),
          walletBefore + deposited - BigInt(after.charged_usdc),
          'the payer withdrew only what was not served',
        );
        const final = await readOnchainChannel(reader(h), row.channel_id as Hex);
        assert.equal(final.totalClaimed, BigInt(after.charged_usdc), 'every served request stayed claimed');
      } finally {
        await h.anvil.rpc('evm_revert', [snapshot]);
      }
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a facilitator outage, then an RPC outage, during a claim: nothing is lost, the next pass claims', async () => {
      const h = harness();
      const { row } = await servedChannel(h);
      const down: Facilitator = {
        ...h.gw.services.topup!.facilitator,
        settle: () => Promise.reject(new FacilitatorUnavailable('facilitator down')),
      };
      const failed = await claimPass(h, { facilitator: down }, true);
      assert.deepEqual(failed.claims, []);
      assert.ok(failed.failures.some((f) => /facilitator down/.test(f)));
      const deadRpc = createPublicClient({ transport: http('http://127.0.0.1:9', { retryCount: 0 }) }) as PublicClient;
      const noChain = await claimPass(h, { clientFor: () => deadRpc }, true);
      assert.deepEqual(noChain.claims, []);
      assert.ok(noChain.failures.some((f) => f.includes(row.channel_id)));
      const unchanged = (await findChannel(h.gw.services.storage.db, row.channel_id))!;
      assert.equal(unchanged.total_claimed_usdc, 0);
      assert.equal((await readOnchainChannel(reader(h), row.channel_id as Hex)).totalClaimed, 0n);

      const retried = await claimPass(h, {}, true);
      assert.ok(retried.claims.some((c) => c.channels.includes(row.channel_id)));
      await assertClaimedAsCharged(h, [row.channel_id]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a crash between the claim transaction and the row update: the next pass finds it claimed on chain and sends no second claim', async () => {
      const h = harness();
      const { row } = await servedChannel(h);
      const crash = claimPass(
        h,
        {
          afterClaim: () => {
            throw new Error('crashed after the claim landed');
          },
        },
        true,
      );
      await assert.rejects(crash, /crashed after the claim landed/);
      assert.equal((await readOnchainChannel(reader(h), row.channel_id as Hex)).totalClaimed, BigInt(row.charged_usdc), 'the claim landed');
      assert.equal((await findChannel(h.gw.services.storage.db, row.channel_id))!.total_claimed_usdc, 0, 'the row was not updated');

      const next = await claimPass(h, {}, true);
      assert.deepEqual(next.claims, [], 'no second claim transaction');
      assert.deepEqual(next.recovered, [row.channel_id]);
      assert.equal(next.settles.length, 1, 'the claimed funds are still settled');
      await assertClaimedAsCharged(h, [row.channel_id]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('two instances: only the lease holder claims', async () => {
      const h = harness();
      const { row } = await servedChannel(h);
      await releaseLease(h.gw.services.storage.db, CLAIM_LEASE, HOLDER);
      const deps = claimDeps(h);
      const [a, b] = await Promise.all([runClaimPass(deps, { holder: 'instance-a', force: true }), runClaimPass(deps, { holder: 'instance-b', force: true })]);
      assert.equal([a, b].filter((o) => o.ran).length, 1, 'exactly one instance ran the pass');
      assert.equal([...a.claims, ...b.claims].length, 1);
      const later = await runClaimPass(deps, { holder: a.ran ? 'instance-b' : 'instance-a', force: true });
      assert.equal(later.ran, false, 'the other instance waits while the lease runs');
      await assertClaimedAsCharged(h, [row.channel_id]);
    });
  });
}
