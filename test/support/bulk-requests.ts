import { sql } from 'kysely';
import type { Storage } from '../../src/storage/database.ts';
import { backfillUsageTotals } from '../../src/storage/migrations/004-usage-totals.ts';
import { keySpendAtUpgrade } from '../../src/storage/migrations/006-key-limits.ts';
import { backfillUsageDaily } from '../../src/storage/migrations/007-dashboard.ts';

/**
 * `count` settled requests of `wallets` (already funded) as rows, written in bulk rather than
 * through the ledger's operations (a hundred thousand in a second or two): a charge entry, a
 * settled reservation and a usage row each, made now, then the balances, the usage and daily
 * totals and the key spend brought to agree with them, so a ledger-check over them passes.
 */
export async function bulkRequests(s: Storage, wallets: string[], count: number, tag: string): Promise<void> {
  const now = Date.now();
  const list = sql.join(wallets.map((w, n) => sql`(${n}, ${w})`));
  const rows = sql`with recursive n(i) as (select 0 union all select i + 1 from n where i + 1 < ${count}),
    w(n, wallet) as (values ${list})
    select ${tag} || '-' || n.i as request_id, w.wallet as wallet, 1 + n.i % 2 as key_id from n join w on w.n = n.i % ${wallets.length}`;
  await s.db.transaction().execute(async (trx) => {
    await sql`insert into ledger_entries (wallet, kind, amount_usdc, reference, note, created_at)
      select wallet, 'charge', -40, request_id, null, ${now} from (${rows})`.execute(trx);
    await sql`insert into reservations (wallet, api_key_id, request_id, amount_usdc, status, charged_usdc, lease_expires_at, created_at, finished_at)
      select wallet, key_id, request_id, 100, 'settled', 40, ${now + 60_000}, ${now}, ${now} from (${rows})`.execute(trx);
    await sql`insert into request_usage (request_id, api_key_id, wallet, model, provider, deployment, prompt_tokens, completion_tokens, reasoning_tokens,
        cached_tokens, charged_usdc, provider_cost_usdc, status, latency_ms, estimated, created_at)
      select request_id, key_id, wallet, 'p/m', 'p', 'p', 10, 20, 0, 0, 40, 30, 'ok', 1, 0, ${now} from (${rows})`.execute(trx);
    await sql`update wallets set balance_usdc = (select sum(amount_usdc) from ledger_entries e where e.wallet = wallets.address)`.execute(trx);
    await backfillUsageTotals(trx);
    await backfillUsageDaily(trx);
    await trx.deleteFrom('key_spend').execute();
    for (const row of await keySpendAtUpgrade(trx)) await trx.insertInto('key_spend').values(row).execute();
  });
}
