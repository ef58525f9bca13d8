import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { assertLedgerAndChainAgree } from '../support/ledger.ts';
import { startTopupHarness, USD, type TopupHarness } from '../support/topup-harness.ts';

/**
 * Scale-out as documented: two `tollgate serve` processes on one PostgreSQL database,
 * configured alike, so both settle with the same relayer key. Each process serializes its own
 * sends; only the lock in the shared database keeps the two from taking the same nonce.
 */
describe('two gateway processes sharing one relayer key on one PostgreSQL database', () => {
  let h: TopupHarness;
  let storage: Storage;
  const gateways: GatewayProcess[] = [];
  before(async () => {
    h = await startTopupHarness('postgres');
    const databaseUrl = await freshDatabaseUrl('postgres');
    const config = { ...h.gatewayConfig, database: { url: databaseUrl } };
    const started = await Promise.allSettled([startGatewayProcess(config, h.env), startGatewayProcess(config, h.env)]);
    for (const s of started) if (s.status === 'fulfilled') gateways.push(s.value);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    storage = openStorage(databaseUrl, { poolSize: 2 });
  });
  after(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await storage?.close();
    await h?.stop();
  });

  test('6 wallets paying through both instances at once are all credited once', async () => {
    const payers = await h.payers(6, 10n);
    const results = await Promise.all(
      payers.map(async (p, i) => {
        const res = await h.payingFetch(p)(`${gateways[i % 2]!.url}/v1/topup`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ amount: 1 }),
        });
        return { status: res.status, body: await res.text() };
      }),
    );
    for (const r of results) assert.equal(r.status, 200, r.body);
    for (const p of payers) {
      const rows = await storage.db.selectFrom('payments').selectAll().where('payer', '=', p.address.toLowerCase()).execute();
      assert.deepEqual(
        rows.map((r) => r.status),
        ['credited'],
      );
      assert.equal(await h.chain.balanceOf(h.chain.usdc, p.address), 9n * USD);
    }
    await assertLedgerAndChainAgree(storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 6);
  });
});
