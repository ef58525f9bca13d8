import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { assertClaimedAsCharged, claimsSuite, claimPass, gasOf, reader, servedChannel } from './claims-setup.ts';

const REQUESTS = Number(process.env.TOLLGATE_CHANNEL_GAS_REQUESTS ?? 1000);

/**
 * What a session of a thousand paid requests costs on chain with a batch-settlement channel: the
 * relayer's transactions (the payer sends none: its deposit is an EIP-3009 authorization) counted
 * by its nonce, and their gas. Gas is the chain's, the same on either engine: SQLite only.
 */
describe('batch-settlement gas per session (sqlite)', () => {
  const harness = claimsSuite('sqlite');

  test(`${REQUESTS} requests on one channel: three transactions (deposit, claim, settle)`, async () => {
    const h = harness();
    const client = reader(h);
    const relayerBefore = await client.getTransactionCount({ address: h.relayer.address });
    const { account, row } = await servedChannel(h, REQUESTS);
    const pass = await claimPass(h, {}, true);
    assert.equal(pass.claims.length, 1);
    assert.equal(pass.settles.length, 1);
    await assertClaimedAsCharged(h, [row.channel_id]);
    const sent = (await client.getTransactionCount({ address: h.relayer.address })) - relayerBefore;
    assert.equal(sent, 3, 'the relayer sent a deposit, a claim and a settle');
    assert.equal(await client.getTransactionCount({ address: account.address }), 0, 'the payer sent no transaction');
    const deposit = await h.gw.services.storage.db
      .selectFrom('channel_transfers')
      .select('tx_hash')
      .where('kind', '=', 'deposit')
      .where('channel_id', '=', row.channel_id)
      .executeTakeFirstOrThrow();
    const gas = [await gasOf(h, deposit.tx_hash), await gasOf(h, pass.claims[0]!.transaction), await gasOf(h, pass.settles[0]!)];
    const total = gas.reduce((a, b) => a + b, 0n);
    console.log(`gas for ${REQUESTS} requests: deposit ${gas[0]}, claim ${gas[1]}, settle ${gas[2]}, total ${total} (${total / BigInt(REQUESTS)} a request)`);
    await assertLedgerConsistent(h.gw.services.storage.db);
  });
});
