/**
 * How many settlements one relayer key sustains, and how long the last of 20 concurrent top-ups
 * waits. Each settlement's nonce, signature and broadcast run one at a time per relayer
 * and chain (src/payments/relayer/relayer-queue.ts); everything else (verify, receipt wait, credit) overlaps.
 *
 * Standalone: `node --import tsx bench/relayer-throughput.ts [--burst N] [--engine sqlite]`. The
 * chain is a local anvil mining each transaction at once, the gateway in-process on SQLite; on a
 * public chain the receipt wait adds its block time to each top-up, but not to the queue, which
 * holds a send only for its RPC round trips.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Writable } from 'node:stream';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { startAnvil } from '../src/devchain/anvil.ts';
import { deployDevChain, type DevChain, type FundedAccount } from '../src/devchain/deploy.ts';
import { payingGatewayConfig } from './paying-gateway.ts';
import { createLogger } from '../src/http/logger.ts';
import { startServer } from '../src/main.ts';

const { values } = parseArgs({ options: { burst: { type: 'string', default: '60' } } });
const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-relayer-'));
const anvil = await startAnvil();
try {
  const chain = await deployDevChain(anvil);
  const [payTo, relayer] = [await chain.newAccount(), await chain.newAccount()];
  const config = payingGatewayConfig({ anvil, chain, dir, payTo, relayer });
  const gw = await startServer(config, { logger: createLogger('warn', new Writable({ write: (_c, _e, done) => done() })) });
  try {
    const topup = (payer: FundedAccount) => {
      const client = new x402Client();
      registerExactEvmScheme(client, { signer: payer });
      client.setSpendControls({ maxAmountPerPayment: '$1', allowedAssets: [{ network: chain.network, asset: chain.usdc, maxAmountPerPayment: '1000000' }] });
      const paying = wrapFetchWithPayment(fetch, client);
      return async () => {
        const t = performance.now();
        const res = await paying(`${gw.url}/v1/topup`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ amount: 1 }),
        });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`top-up answered ${res.status}`);
        return performance.now() - t;
      };
    };
    const burst = async (n: number) => {
      const payers = await fund(chain, n);
      const start = performance.now();
      const waits = await Promise.all(payers.map((p) => topup(p)()));
      return { seconds: (performance.now() - start) / 1000, waits: waits.sort((a, b) => a - b) };
    };
    await burst(3); // warm-up: the payment path is loaded by the first payment
    const n = Number(values.burst);
    const sustained = await burst(n);
    const twenty = await burst(20);
    const hashes = await gw.services.storage.db.selectFrom('payments').select('tx_hash').where('status', '=', 'credited').limit(5).execute();
    const gas = await Promise.all(hashes.map(async (p) => (await chain.client(relayer).getTransactionReceipt({ hash: p.tx_hash as `0x${string}` })).gasUsed));
    const line = (s: string) => process.stdout.write(`${s}\n`);
    line(`One relayer on anvil (automine), gateway on SQLite, stock @x402/fetch clients, $1 USDC top-ups:`);
    line(`  ${n} concurrent top-ups settled in ${sustained.seconds.toFixed(2)} s: ${(n / sustained.seconds).toFixed(1)} settlements/s`);
    line(`  gas used per EIP-3009 settlement: ${[...new Set(gas.map(String))].join(', ')}`);
    line(
      `  20 concurrent top-ups: first credited after ${twenty.waits[0]!.toFixed(0)} ms, median ${twenty.waits[10]!.toFixed(0)} ms, last ${twenty.waits[19]!.toFixed(0)} ms`,
    );
  } finally {
    await gw.stop();
  }
} finally {
  await anvil.stop();
  rmSync(dir, { recursive: true, force: true });
}

/** Funded one after another: funding is itself a run of transactions from one key. */
async function fund(chain: DevChain, n: number): Promise<FundedAccount[]> {
  const out: FundedAccount[] = [];
  for (let i = 0; i < n; i++) out.push(await chain.newAccount({ usdc: 10n * 1_000_000n }));
  return out;
}
