import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import OpenAI from 'openai';
import { wrapFetchWithPayment } from '@x402/fetch';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { ENGINES, freshDatabaseUrl } from '../../support/engines.ts';
import { mergeConfig } from '../../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../../support/gateway-process.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { MODELS } from '../../support/chat-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { UPTO_BODY, uptoClient, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * The state of a dropped upto settle is in the database, not in a process: a gateway killed
 * (SIGKILL) after its settle was broadcast and dropped by the node leaves a `settling` row with
 * the dead hash, and the next gateway on that database (its reconciler, at start-up and on its
 * timer) sends the charge again and closes the payment settled.
 */
for (const engine of ENGINES) {
  describe(`upto: a dropped settle across a restart (${engine})`, () => {
    const harness = uptoSuite(engine);
    const processes: GatewayProcess[] = [];
    let storage: Storage | undefined;
    after(async () => {
      await Promise.all(processes.map((p) => p.stop().catch(() => undefined)));
      await storage?.close();
    });

    test('killed after the drop: the restarted gateway sends it again and it settles for the charge, once', async () => {
      const h = harness();
      const databaseUrl = await freshDatabaseUrl(engine);
      storage = openStorage(databaseUrl, { poolSize: 2 });
      const config = mergeConfig(h.gatewayConfig, {
        database: { url: databaseUrl },
        providers: { fake: { baseUrl: h.fake.url }, other: { baseUrl: h.fake.url } },
        models: MODELS,
        payPerRequest: { enabled: true, upto: true },
        rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
        topup: { settleWaitSeconds: 2, reconcileIntervalSeconds: 1 },
      });
      const payer = await uptoPayer(h);
      const first = await startGatewayProcess(config, h.env);
      processes.push(first);
      const rows = () => storage!.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute();

      await h.anvil.rpc('evm_setAutomine', [false]);
      let dropped: string;
      try {
        const paying = wrapFetchWithPayment(fetch, uptoClient(h, payer)) as typeof fetch;
        const client = new OpenAI({ baseURL: `${first.url}/v1`, apiKey: 'unused', defaultHeaders: { Authorization: null }, fetch: paying, maxRetries: 0 });
        await client.chat.completions.create(UPTO_BODY);
        await until(async () => Boolean((await rows())[0]?.tx_hash), 'the settle was broadcast', 20_000);
        // The receipt wait (2 s) gives up with the transaction still in the pool.
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        await first.kill();
        dropped = (await rows())[0]!.tx_hash!;
        await h.anvil.rpc('anvil_dropTransaction', [dropped]);
      } finally {
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      const [atKill] = await rows();
      assert.equal(atKill!.upto_state, 'settling');

      processes.push(await startGatewayProcess(config, h.env));
      await until(async () => (await rows())[0]!.upto_state === 'settled', 'the restarted gateway settles it', 30_000);
      const [done] = await rows();
      assert.equal(done!.onchain_amount_atomic, done!.settle_amount_atomic);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(done!.settle_amount_atomic!), 'the charge, once');
      await assertLedgerConsistent(storage.db);
      const audit = await auditCreditsOnChain(storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
      assert.deepEqual(audit.problems, [], 'ledger-check --chain');
    });
  });
}
