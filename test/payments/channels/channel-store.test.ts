import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { getBalance } from '../../../src/ledger/balances.ts';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import { ChannelHoldInvariantError, channelHoldWallet, holdChannelRequest } from '../../../src/ledger/operations/channel-hold.ts';
import { finishReservation } from '../../../src/ledger/operations/finish.ts';
import { reserve } from '../../../src/ledger/operations/reserve.ts';
import { finishPending, startRequest } from '../../../src/payments/channels/channel-finish.ts';
import { dropLease, findChannel, listUnclaimed, markClaimed, recordChannel, recordTransfer, takeLease } from '../../../src/payments/channels/channel-store.ts';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { migrateToLatest } from '../../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../../support/engines.ts';
import { assertLedgerConsistent, newWallet, usageRecord } from '../../support/ledger.ts';

/**
 * The channel store and the channel hold's ledger operations, driven directly (no gateway, no
 * chain): a request's ceiling held, charged, committed; a failed request leaving the channel as it
 * was; the lease as a compare-and-set; a crash between the answer and the commit finished by the
 * next request; and ledger-check proving each channel.
 */
const CEILING = 1_000;
const LEASE_MS = 30_000;

async function newChannel(s: Storage, balance = 50_000, totalClaimed = 0) {
  const channelId = `0x${randomBytes(32).toString('hex')}` as `0x${string}`;
  const payer = newWallet() as `0x${string}`;
  const config = {
    payer,
    payerAuthorizer: payer,
    receiver: newWallet() as `0x${string}`,
    receiverAuthorizer: newWallet() as `0x${string}`,
    token: newWallet() as `0x${string}`,
    withdrawDelay: 900,
    salt: `0x${'00'.repeat(32)}` as `0x${string}`,
  };
  const snapshot = { channelId, balance, totalClaimed, withdrawRequestedAt: 0, refundNonce: '0' };
  await recordChannel(s.db, { channelId, network: 'eip155:31337', config, snapshot }, Date.now());
  return channelId;
}

/** One request on the channel under `owner`'s lease, its voucher adding CEILING, its bill charging `charge` (null: left running). */
async function request(s: Storage, channelId: string, charge: number | null, owner = randomUUID()) {
  const row = (await findChannel(s.db, channelId))!;
  assert.equal(await takeLease(s.db, channelId, owner, Date.now(), LEASE_MS), true);
  const requestId = owner;
  const max = row.charged_usdc + CEILING;
  assert.equal(
    await startRequest(
      s.db,
      channelId,
      owner,
      { requestId, maxClaimableUsdc: max, signature: `0x${'ab'.repeat(65)}`, ceilingUsdc: CEILING, chargedUsdc: row.charged_usdc },
      Date.now(),
    ),
    true,
  );
  const wallet = channelHoldWallet(channelId);
  assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId, amountUsdc: CEILING, leaseMs: 60_000 }), true);
  if (charge !== null) await finishReservation(s, requestId, charge, usageRecord(requestId, wallet));
  return { requestId, owner, max };
}

for (const engine of ENGINES) {
  describe(`batch-settlement channel store and holds (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('a request is charged its cost within its ceiling: one hold, one release of the rest, the voucher adopted, ledger-check clean', async () => {
      const channelId = await newChannel(s);
      const { owner, max } = await request(s, channelId, 250);
      const finished = await finishPending(s.db, channelId, Date.now());
      assert.deepEqual(finished, { kind: 'finished', requestId: owner, chargeUsdc: 250, chargedUsdc: 250 });
      await dropLease(s.db, channelId, owner, Date.now());
      const row = (await findChannel(s.db, channelId))!;
      assert.equal(row.charged_usdc, 250);
      assert.equal(row.signed_max_usdc, max);
      assert.equal(row.lease_owner, null);
      assert.equal(row.pending_request, null);
      const entries = await s.db
        .selectFrom('ledger_entries')
        .select(['kind', 'amount_usdc'])
        .where('wallet', '=', channelHoldWallet(channelId))
        .orderBy('id')
        .execute();
      assert.deepEqual(
        entries.map((e) => [e.kind, Number(e.amount_usdc)]),
        [
          ['channel_hold', CEILING],
          ['charge', -250],
          ['channel_release', -750],
        ],
      );
      assert.deepEqual(await getBalance(s.db, channelHoldWallet(channelId)), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      await assertLedgerConsistent(s.db);
    });

    test('twenty requests: the charged total is the sum of the charges, each voucher adding exactly its ceiling', async () => {
      const channelId = await newChannel(s);
      let total = 0;
      for (let i = 1; i <= 20; i++) {
        const { owner } = await request(s, channelId, i * 7);
        await finishPending(s.db, channelId, Date.now());
        await dropLease(s.db, channelId, owner, Date.now());
        total += i * 7;
      }
      const row = (await findChannel(s.db, channelId))!;
      assert.equal(row.charged_usdc, total);
      assert.equal(row.signed_max_usdc, total - 20 * 7 + CEILING);
      await assertLedgerConsistent(s.db);
    });

    test('a request charged nothing (the provider failed) leaves the channel as it was: its voucher is good for the retry', async () => {
      const channelId = await newChannel(s);
      const { owner } = await request(s, channelId, 0);
      assert.deepEqual(await finishPending(s.db, channelId, Date.now()), { kind: 'finished', requestId: owner, chargeUsdc: 0, chargedUsdc: 0 });
      await dropLease(s.db, channelId, owner, Date.now());
      const row = (await findChannel(s.db, channelId))!;
      assert.equal(row.charged_usdc, 0);
      assert.equal(row.signed_max_usdc, null);
      assert.equal(row.signature, null);
      await assertLedgerConsistent(s.db);
    });

    test('while the bill is open nothing is committed; the lease cannot be dropped with a request pending', async () => {
      const channelId = await newChannel(s);
      const { owner, requestId } = await request(s, channelId, null);
      assert.deepEqual(await finishPending(s.db, channelId, Date.now()), { kind: 'running', requestId });
      await dropLease(s.db, channelId, owner, Date.now());
      assert.equal((await findChannel(s.db, channelId))!.lease_owner, owner);
      await assertLedgerConsistent(s.db);
      await finishReservation(s, requestId, 400, usageRecord(requestId, channelHoldWallet(channelId)));
      assert.equal((await finishPending(s.db, channelId, Date.now())).kind, 'finished');
      await dropLease(s.db, channelId, owner, Date.now());
      assert.equal((await findChannel(s.db, channelId))!.charged_usdc, 400);
      await assertLedgerConsistent(s.db);
    });

    test('the gateway dies between the answer and the commit: the next request takes over the expired lease and commits the charge', async () => {
      const channelId = await newChannel(s);
      const dead = await request(s, channelId, 321);
      // Nothing commits: the process is gone. Its lease runs out.
      await s.db
        .updateTable('channels')
        .set({ lease_until: Date.now() - 1 })
        .where('channel_id', '=', channelId)
        .execute();
      const next = randomUUID();
      assert.equal(await takeLease(s.db, channelId, next, Date.now(), LEASE_MS), true);
      assert.deepEqual(await finishPending(s.db, channelId, Date.now()), { kind: 'finished', requestId: dead.requestId, chargeUsdc: 321, chargedUsdc: 321 });
      const row = (await findChannel(s.db, channelId))!;
      assert.equal(row.charged_usdc, 321);
      assert.equal(row.signed_max_usdc, dead.max);
      assert.equal(row.lease_owner, next, 'the taker keeps its lease');
      await dropLease(s.db, channelId, next, Date.now());
      await assertLedgerConsistent(s.db);
    });

    test('the lease is a compare-and-set: of many takers at once exactly one gets it', async () => {
      const channelId = await newChannel(s);
      const owners = Array.from({ length: 8 }, () => randomUUID());
      const taken = await Promise.all(owners.map((o) => takeLease(s.db, channelId, o, Date.now(), LEASE_MS)));
      assert.equal(taken.filter(Boolean).length, 1);
      const winner = owners[taken.indexOf(true)]!;
      assert.equal(await takeLease(s.db, channelId, randomUUID(), Date.now(), LEASE_MS), false);
      await dropLease(s.db, channelId, winner, Date.now());
      assert.equal(await takeLease(s.db, channelId, randomUUID(), Date.now(), LEASE_MS), true);
    });

    test('claims: listed while charges are unclaimed, marked up to the charged amount and never beyond', async () => {
      const channelId = await newChannel(s);
      const { owner } = await request(s, channelId, 600);
      await finishPending(s.db, channelId, Date.now());
      await dropLease(s.db, channelId, owner, Date.now());
      assert.ok((await listUnclaimed(s.db)).some((c) => c.channel_id === channelId));
      assert.equal(await markClaimed(s.db, channelId, 601, `0x${'01'.repeat(32)}`, Date.now()), false, 'a claim above the charges is refused');
      assert.equal(await markClaimed(s.db, channelId, 600, `0x${'02'.repeat(32)}`, Date.now()), true);
      assert.ok(!(await listUnclaimed(s.db)).some((c) => c.channel_id === channelId));
      assert.equal(await recordTransfer(s.db, { channelId, kind: 'deposit', amountUsdc: 5, txHash: `0x${'03'.repeat(32)}` }, Date.now()), true);
      assert.equal(
        await recordTransfer(s.db, { channelId, kind: 'deposit', amountUsdc: 5, txHash: `0x${'03'.repeat(32)}` }, Date.now()),
        false,
        'once per transaction',
      );
      assert.equal((await findChannel(s.db, channelId))!.deposited_usdc, 5);
      await assertLedgerConsistent(s.db);
    });

    describe('attack: the ledger and the channel row disagree', () => {
      test('a hold with no request pending on the channel is refused, and nothing is credited', async () => {
        const channelId = await newChannel(s);
        await assert.rejects(
          s.db.transaction().execute((trx) => holdChannelRequest(trx, channelId, 'forged', CEILING, Date.now())),
          ChannelHoldInvariantError,
        );
        assert.equal((await getBalance(s.db, channelHoldWallet(channelId))).balance_usdc, 0);
      });

      test('a charged amount raised in the row without a request (tampering) is a ledger-check problem', async () => {
        const channelId = await newChannel(s);
        const { owner, max } = await request(s, channelId, 100);
        await finishPending(s.db, channelId, Date.now());
        await dropLease(s.db, channelId, owner, Date.now());
        await s.db.updateTable('channels').set({ charged_usdc: 150 }).where('channel_id', '=', channelId).execute();
        const problems = (await checkLedger(s.db)).problems;
        assert.ok(
          problems.some((p) => p.includes(channelId) && p.includes('kept 100')),
          problems.join('\n'),
        );
        await s.db
          .updateTable('channels')
          .set({ charged_usdc: max + 1 })
          .where('channel_id', '=', channelId)
          .execute();
        assert.ok((await checkLedger(s.db)).problems.some((p) => p.includes('above its latest signed voucher')));
        await s.db.updateTable('channels').set({ charged_usdc: 100 }).where('channel_id', '=', channelId).execute();
        await assertLedgerConsistent(s.db);
      });
    });
  });
}
