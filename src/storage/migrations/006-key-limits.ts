import { sql, type Kysely } from 'kysely';

/**
 * Per-key spend controls: a spend limit over a period, a model allowlist and an expiry on
 * each API key, and `key_spend`, the running spend of each key per period bucket (see
 * src/ledger/spend-periods.ts), kept in the same unit as the wallet's reservation and finish.
 * Existing reservations are counted into it here, so keys used before the upgrade start with
 * their true spend. Run it with every instance stopped (as every migration): an old instance
 * would not count its requests.
 */
export function keyLimits() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('api_keys').addColumn('spend_limit_usdc', 'bigint').execute();
      await db.schema.alterTable('api_keys').addColumn('spend_limit_period', 'text').execute();
      // A JSON array of full model ids (`provider/name`); NULL means every model.
      await db.schema.alterTable('api_keys').addColumn('allowed_models', 'text').execute();
      await db.schema.alterTable('api_keys').addColumn('expires_at', 'bigint').execute();

      await db.schema
        .createTable('key_spend')
        .addColumn('api_key_id', 'bigint', (c) => c.notNull())
        .addColumn('period', 'text', (c) => c.notNull())
        .addColumn('spent_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('locked_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('key_spend_pk', ['api_key_id', 'period'])
        .addCheckConstraint('key_spend_not_negative', sql`spent_usdc >= 0 and locked_usdc >= 0`)
        .execute();

      const rows = await keySpendAtUpgrade(db);
      for (let i = 0; i < rows.length; i += 500) {
        await db
          .insertInto('key_spend')
          .values(rows.slice(i, i + 500))
          .execute();
      }
    },
  };
}

/**
 * FROZEN: the key_spend back-fill as this migration shipped it (the bucket arithmetic of
 * src/ledger/spend-periods.ts and the grouping of src/ledger/key-spend-audit.ts, copied here). A
 * migration must write what it wrote on the day it was released, whatever today's code does, so it
 * imports no live ledger code: change those files freely, never this copy.
 *
 * Per key and bucket: the amounts of its pending reservations (locked) and the charges of its
 * request_usage rows (spent), each counted in the buckets (`total`, `day:YYYY-MM-DD`,
 * `month:YYYY-MM`, UTC) of its reservation time. Grouped by UTC day in SQL, rolled up here.
 */
export async function keySpendAtUpgrade(db: Kysely<any>): Promise<{ api_key_id: number; period: string; spent_usdc: number; locked_usdc: number }[]> {
  const DAY = 86_400_000;
  const days = await db
    .selectFrom('reservations as r')
    .leftJoin('request_usage as u', 'u.request_id', 'r.request_id')
    .select([
      'r.api_key_id',
      sql<number>`r.created_at / ${sql.lit(DAY)}`.as('day'),
      sql<number>`coalesce(sum(case when r.status = 'pending' then r.amount_usdc else 0 end), 0)`.as('locked'),
      sql<number>`coalesce(sum(u.charged_usdc), 0)`.as('spent'),
    ])
    .where('r.api_key_id', 'is not', null)
    .groupBy(['r.api_key_id', sql`r.created_at / ${sql.lit(DAY)}`])
    .execute();
  const sums = new Map<string, { api_key_id: number; period: string; spent_usdc: number; locked_usdc: number }>();
  const add = (apiKeyId: number, period: string, spent: number, locked: number) => {
    const id = `${apiKeyId} ${period}`;
    const row = sums.get(id) ?? { api_key_id: apiKeyId, period, spent_usdc: 0, locked_usdc: 0 };
    row.spent_usdc += spent;
    row.locked_usdc += locked;
    sums.set(id, row);
  };
  for (const d of days) {
    const key = Number(d.api_key_id);
    const iso = new Date(Number(d.day) * DAY).toISOString();
    const [spent, locked] = [Number(d.spent), Number(d.locked)];
    add(key, 'total', spent, locked);
    add(key, `day:${iso.slice(0, 10)}`, spent, locked);
    add(key, `month:${iso.slice(0, 7)}`, spent, locked);
  }
  return [...sums.values()];
}
