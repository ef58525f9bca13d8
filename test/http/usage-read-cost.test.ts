import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery, sql, type Kysely } from 'kysely';
import { usageByKey, usageByKeyQuery, type KeyUsage } from '../../src/usage/usage.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { backfillUsageTotals } from '../../src/storage/migrations/004-usage-totals.ts';
import { backfillUsageDaily } from '../../src/storage/migrations/007-dashboard.ts';
import type { Database } from '../../src/storage/schema.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

/**
 * GET /v1/usage/:wallet summing every request_usage row of the wallet: any key holder can call
 * it, and with 1M rows one call took 0.3 s and, on SQLite, held the only connection, stalling
 * every other wallet's reserve and settle. The read takes one totals row per key.
 *
 * The issue asks that the read "stays under 5 ms". Timing thresholds are banned in this suite (they
 * fail on a loaded 2-core CI machine and pass on a fast one whatever the code does), so the tests
 * assert the cause instead, the query plan of the exact query the route runs: it never touches
 * request_usage. The measured time is printed as a test diagnostic for the record.
 */
const BULK_ROWS = 1_000_000;

async function insertKey(db: Kysely<Database>, wallet: string, label: string): Promise<number> {
  const row = await db
    .insertInto('api_keys')
    .values({ wallet, key_hash: `hash-${wallet}-${label}`, prefix: 'sk-', last4: 'abcd', label, created_at: Date.now(), revoked_at: null, last_used_at: null })
    .returning('id')
    .executeTakeFirstOrThrow();
  return Number(row.id);
}

/** `count` usage rows alternating between two keys, written in one statement by the database itself. */
async function insertBulkUsage(storage: Storage, wallet: string, [even, odd]: [number, number], count: number): Promise<void> {
  const columns = sql`(request_id, api_key_id, wallet, model, provider, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens,
    charged_usdc, provider_cost_usdc, status, latency_ms, estimated, created_at)`;
  const values = (i: ReturnType<typeof sql.ref>) => sql`'bulk-' || ${i}, case when ${i} % 2 = 0 then ${sql.lit(even)} else ${sql.lit(odd)} end, ${wallet},
    'p/m', 'p', ${i} % 100, ${i} % 7, ${i} % 3, ${i} % 5, ${i} % 50, ${i} % 40, 'ok', 1, 0, ${sql.lit(Date.now())}`;
  const i = sql.ref('i');
  if (storage.engine === 'sqlite') {
    await sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < ${sql.lit(count)})
      insert into request_usage ${columns} select ${values(i)} from n`.execute(storage.db);
  } else {
    await sql`insert into request_usage ${columns} select ${values(i)} from generate_series(1, ${sql.lit(count)}) as g(i)`.execute(storage.db);
  }
}

/** What the usage read reported before this fix (the full aggregation): the reference the totals must match. */
async function aggregatedUsage(db: Kysely<Database>, wallet: string): Promise<KeyUsage[]> {
  const rows = await db
    .selectFrom('api_keys as k')
    .leftJoin('request_usage as u', 'u.api_key_id', 'k.id')
    .select([
      'k.id',
      'k.label',
      'k.created_at',
      'k.revoked_at',
      sql<number>`count(u.id)`.as('n'),
      sql<number>`coalesce(sum(u.prompt_tokens), 0)`.as('prompt'),
      sql<number>`coalesce(sum(u.completion_tokens), 0)`.as('completion'),
      sql<number>`coalesce(sum(u.charged_usdc), 0)`.as('charged'),
      sql<number>`coalesce(sum(u.provider_cost_usdc), 0)`.as('cost'),
    ])
    .where('k.wallet', '=', wallet)
    .groupBy(['k.id', 'k.label', 'k.created_at', 'k.revoked_at'])
    .orderBy('k.id')
    .execute();
  return rows.map((r) => ({
    api_key_id: Number(r.id),
    label: r.label,
    created_at: Number(r.created_at),
    revoked_at: r.revoked_at === null ? null : Number(r.revoked_at),
    request_count: Number(r.n),
    total_prompt_tokens: Number(r.prompt),
    total_completion_tokens: Number(r.completion),
    total_charged_usdc: Number(r.charged),
    total_provider_cost_usdc: Number(r.cost),
  }));
}

/** The plan of the exact query usageByKey runs, one line per step. */
async function usageReadPlan(storage: Storage, wallet: string): Promise<string[]> {
  const compiled = usageByKeyQuery(storage.db, wallet).compile();
  const explain = storage.engine === 'sqlite' ? 'EXPLAIN QUERY PLAN ' : 'EXPLAIN ';
  const { rows } = await storage.db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(explain + compiled.sql, [...compiled.parameters]));
  return rows.map((r) => String(storage.engine === 'sqlite' ? r.detail : r['QUERY PLAN']));
}

async function medianMs(times: number, run: () => Promise<unknown>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < times; i++) {
    const start = performance.now();
    await run();
    samples.push(performance.now() - start);
  }
  return samples.sort((a, b) => a - b)[Math.floor(times / 2)]!;
}

for (const engine of ENGINES) {
  describe(`usage read cost (${engine})`, () => {
    let storage: Storage;
    before(async () => {
      storage = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(storage);
    });
    after(() => storage.close());

    test(`with ${BULK_ROWS.toLocaleString('en')} usage rows the read is exact and never reads request_usage`, async (t) => {
      const wallet = await fundedWallet(storage.db, 10_000_000);
      const keyA = await insertKey(storage.db, wallet, 'a');
      const keyB = await insertKey(storage.db, wallet, 'b');
      await insertKey(storage.db, wallet, 'never used');

      let start = performance.now();
      await insertBulkUsage(storage, wallet, [keyA, keyB], BULK_ROWS);
      // Rows written behind the finish's back, as an upgrade finds them: the migration's backfill
      // turns them into totals.
      await backfillUsageTotals(storage.db);
      await backfillUsageDaily(storage.db);
      t.diagnostic(`${engine}: ${BULK_ROWS} rows inserted and backfilled in ${Math.round(performance.now() - start)} ms`);
      // Then requests finished the normal way (a settle and a void) add to the backfilled totals.
      for (const [requestId, charge] of [
        [`${wallet}-settled`, 700],
        [`${wallet}-voided`, 0],
      ] as const) {
        assert.ok(await reserve(storage, { wallet, apiKeyId: keyA, requestId, amountUsdc: 1000, leaseMs: 60_000 }));
        await finishReservation(storage, requestId, charge, { ...usageRecord(requestId, wallet), apiKeyId: keyA });
      }
      if (engine === 'postgres') await sql`analyze`.execute(storage.db);

      start = performance.now();
      const expected = await aggregatedUsage(storage.db, wallet);
      const aggregationMs = performance.now() - start;
      const read = await usageByKey(storage.db, wallet);
      assert.deepEqual(read, expected);
      const [a, b, unused] = read as [KeyUsage, KeyUsage, KeyUsage];
      assert.equal(read.length, 3);
      assert.equal(a.request_count + b.request_count, BULK_ROWS + 2, 'a voided request counts as a request, as before');
      assert.equal(unused.request_count, 0);

      const plan = await usageReadPlan(storage, wallet);
      assert.ok(plan.length > 0);
      assert.ok(!plan.some((step) => /request_usage/.test(step)), `the usage read touches request_usage:\n${plan.join('\n')}`);
      assert.ok(
        plan.some((step) => /usage_totals/.test(step)),
        `the usage read does not use the totals:\n${plan.join('\n')}`,
      );
      if (engine === 'sqlite') {
        // Every table is reached through an index: the read costs O(keys of this wallet).
        assert.ok(!plan.some((step) => /^SCAN/.test(step)), `the usage read scans a table:\n${plan.join('\n')}`);
      }

      const readMs = await medianMs(21, () => usageByKey(storage.db, wallet));
      t.diagnostic(
        `${engine}: usage read median ${readMs.toFixed(2)} ms (the full aggregation it replaces: ${aggregationMs.toFixed(0)} ms); plan: ${plan.join(' | ')}`,
      );
      await assertLedgerConsistent(storage.db);
    });

    test('parallel settles and voids for one key all reach its totals', async () => {
      const wallets = await Promise.all([1, 2, 3, 4].map(() => fundedWallet(storage.db, 1_000_000)));
      const owner = wallets[0]!;
      const key = await insertKey(storage.db, owner, 'busy');
      // 40 requests on one key, spread over four wallets so the finishes do not queue on one wallet
      // row and really meet at the key's totals row; every tenth is voided.
      const requests = Array.from({ length: 40 }, (_, i) => ({
        requestId: `${owner}-parallel-${i}`,
        wallet: wallets[i % 4]!,
        charge: i % 10 === 0 ? 0 : 100 + i,
      }));
      for (const r of requests)
        assert.ok(await reserve(storage, { wallet: r.wallet, apiKeyId: key, requestId: r.requestId, amountUsdc: 1000, leaseMs: 60_000 }));
      const outcomes = await Promise.all(
        requests.map((r) => finishReservation(storage, r.requestId, r.charge, { ...usageRecord(r.requestId, r.wallet), apiKeyId: key })),
      );
      assert.ok(outcomes.every((o) => o.applied));
      const [totals] = (await usageByKey(storage.db, owner)) as [KeyUsage];
      assert.equal(totals.request_count, 40);
      assert.equal(totals.total_prompt_tokens, 40 * 10);
      assert.equal(
        totals.total_charged_usdc,
        requests.reduce((sum, r) => sum + r.charge, 0),
      );
      // usageRecord's provider cost is 1 per request; a void records none.
      assert.equal(totals.total_provider_cost_usdc, requests.filter((r) => r.charge > 0).length);
      await assertLedgerConsistent(storage.db);
    });

    test('a swept reservation writes no usage row and leaves the totals alone', async () => {
      const wallet = await fundedWallet(storage.db, 1_000_000);
      const key = await insertKey(storage.db, wallet, 'crashed');
      assert.ok(await reserve(storage, { wallet, apiKeyId: key, requestId: `${wallet}-lost`, amountUsdc: 1000, leaseMs: 1 }));
      // The sweeper's clock a minute on: the one-millisecond lease has run out.
      assert.ok((await sweepExpiredReservations(storage.db, Date.now() + 60_000)) >= 1);
      const [totals] = (await usageByKey(storage.db, wallet)) as [KeyUsage];
      assert.equal(totals.request_count, 0);
      await assertLedgerConsistent(storage.db);
    });

    test('the ledger check reports totals that disagree with the usage rows', async () => {
      const wallet = await fundedWallet(storage.db, 1_000_000);
      const key = await insertKey(storage.db, wallet, 'drift');
      assert.ok(await reserve(storage, { wallet, apiKeyId: key, requestId: `${wallet}-d`, amountUsdc: 1000, leaseMs: 60_000 }));
      await finishReservation(storage, `${wallet}-d`, 500, { ...usageRecord(`${wallet}-d`, wallet), apiKeyId: key });
      await assertLedgerConsistent(storage.db);

      await sql`update usage_totals set charged_usdc = charged_usdc + 1 where api_key_id = ${key}`.execute(storage.db);
      assert.deepEqual((await checkLedger(storage.db)).problems, [`api key #${key}: usage totals disagree with request_usage (charged_usdc 501 != 500)`]);
      await sql`update usage_totals set charged_usdc = charged_usdc - 1 where api_key_id = ${key}`.execute(storage.db);

      // A usage row written without its totals (a writer that bypassed the finish).
      const ghost = key + 1000;
      await storage.db
        .insertInto('request_usage')
        .values({
          request_id: `${wallet}-ghost`,
          api_key_id: ghost,
          wallet,
          model: 'p/m',
          provider: 'p',
          prompt_tokens: 1,
          completion_tokens: 0,
          reasoning_tokens: 0,
          cached_tokens: 0,
          charged_usdc: 0,
          provider_cost_usdc: 0,
          status: 'ok',
          latency_ms: 1,
          estimated: 0,
          created_at: Date.now(),
        })
        .execute();
      // It is missing from both running totals: the per-key ones and the per-day ones.
      const problems = (await checkLedger(storage.db)).problems;
      assert.equal(problems.length, 2, problems.join('\n'));
      assert.match(problems[0]!, new RegExp(`api key #${ghost}: .*request_count 0 != 1`));
      assert.match(problems[1]!, new RegExp(`api key #${ghost}: daily usage totals .*request_count 0 != 1`));
      await backfillUsageTotals(storage.db);
      await backfillUsageDaily(storage.db);
      await assertLedgerConsistent(storage.db);
    });
  });
}
