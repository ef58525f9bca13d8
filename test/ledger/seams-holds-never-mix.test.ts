import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { getBalance } from '../../src/ledger/balances.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { channelHoldWallet } from '../../src/ledger/operations/channel-hold.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { lateCharge } from '../../src/ledger/operations/late-charge.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { uptoHoldWallet } from '../../src/ledger/operations/upto-hold.ts';
import { startRequest } from '../../src/payments/channels/channel-finish.ts';
import { recordChannel, takeLease } from '../../src/payments/channels/channel-store.ts';
import { holdMaximum } from '../../src/payments/upto/upto-store.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { newWallet, usageRecord } from '../support/ledger.ts';
import { MAXIMUM, PAYLOAD, pendingUpto } from '../support/upto-hold-fixtures.ts';

const CEILING = 400;

/**
 * One payer with money in three places at once: its own prepaid wallet, its upto payment's hold
 * (`<payer>#upto`) and a request's ceiling on its channel's hold (`<channel>#channel`), with a swept
 * request on each hold whose spooled settle comes back late. A late charge bills only the wallet its
 * request reserved on, under that wallet's rule; a settle record naming another of the payer's
 * wallets (a bug in whatever wrote it) takes nothing from any of them.
 */
for (const engine of ENGINES) {
  describe(`attack: a payer's upto hold, channel hold and own wallet never pay for each other's late charges (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    async function payerWithTwoHolds() {
      const payer = newWallet();
      await adjustBalance(s.db, { wallet: payer, amountUsdc: 5_000 });
      const { id } = await pendingUpto(s, payer);
      assert.equal((await holdMaximum(s.db, id, PAYLOAD)).kind, 'held');
      const uptoRequest = randomUUID();
      assert.equal(await reserve(s, { wallet: uptoHoldWallet(payer), apiKeyId: 1, requestId: uptoRequest, amountUsdc: MAXIMUM, leaseMs: 1 }), true);
      const channelId = `0x${randomBytes(32).toString('hex')}` as `0x${string}`;
      const config = {
        payer: payer as `0x${string}`,
        payerAuthorizer: payer as `0x${string}`,
        receiver: newWallet() as `0x${string}`,
        receiverAuthorizer: newWallet() as `0x${string}`,
        token: newWallet() as `0x${string}`,
        withdrawDelay: 900,
        salt: `0x${'00'.repeat(32)}` as `0x${string}`,
      };
      const snapshot = { channelId, balance: 50_000, totalClaimed: 0, withdrawRequestedAt: 0, refundNonce: '0' };
      await recordChannel(s.db, { channelId, network: 'eip155:31337', config, snapshot }, Date.now());
      const channelRequest = randomUUID();
      assert.equal(await takeLease(s.db, channelId, channelRequest, Date.now(), 60_000), true);
      const voucher = { requestId: channelRequest, maxClaimableUsdc: CEILING, signature: `0x${'ab'.repeat(65)}`, ceilingUsdc: CEILING, chargedUsdc: 0 };
      assert.equal(await startRequest(s.db, channelId, channelRequest, voucher, Date.now()), true);
      const channelWallet = channelHoldWallet(channelId);
      assert.equal(await reserve(s, { wallet: channelWallet, apiKeyId: 1, requestId: channelRequest, amountUsdc: CEILING, leaseMs: 1 }), true);
      // Both answers delivered, their settles spooled through an outage; the sweeper released both.
      assert.equal(await sweepExpiredReservations(s.db, Date.now() + 60_000), 2);
      const wallets = { own: payer, upto: uptoHoldWallet(payer), channel: channelWallet };
      const balances = async () =>
        Object.fromEntries(await Promise.all(Object.entries(wallets).map(async ([k, w]) => [k, (await getBalance(s.db, w)).balance_usdc])));
      return { wallets, uptoRequest, channelRequest, balances };
    }

    const late = (requestId: string, wallet: string, chargeUsdc: number) =>
      lateCharge(s, { requestId, wallet, chargeUsdc, usage: usageRecord(requestId, wallet) }, Date.now());

    test("a settle record naming another of the payer's wallets bills nothing anywhere", async () => {
      const p = await payerWithTwoHolds();
      const before = await p.balances();
      for (const wallet of [p.wallets.own, p.wallets.channel])
        assert.equal((await late(p.uptoRequest, wallet, 300)).kind, 'unknown', `upto request billed to ${wallet}`);
      for (const wallet of [p.wallets.own, p.wallets.upto])
        assert.equal((await late(p.channelRequest, wallet, 300)).kind, 'unknown', `channel request billed to ${wallet}`);
      assert.deepEqual(await p.balances(), before);
      assert.deepEqual((await checkLedger(s.db)).problems, []);
    });

    test('each late charge on its own hold: the upto one from its payment while it holds, the channel one nothing; the other two wallets untouched', async () => {
      const p = await payerWithTwoHolds();
      const before = await p.balances();
      const channel = await late(p.channelRequest, p.wallets.channel, 300);
      assert.deepEqual(channel.kind === 'late' && [channel.outcome.chargedUsdc, channel.outcome.shortfallUsdc], [0, 300]);
      const upto = await late(p.uptoRequest, p.wallets.upto, 300);
      assert.deepEqual(upto.kind === 'late' && upto.outcome.chargedUsdc, 300);
      assert.deepEqual(await p.balances(), { ...before, upto: before.upto - 300 });
      assert.deepEqual((await checkLedger(s.db)).problems, []);
    });
  });
}
