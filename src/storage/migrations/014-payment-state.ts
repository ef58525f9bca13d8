import { sql, type Kysely } from 'kysely';

/**
 * One explicit state per payment (src/payments/states.ts is the machine). `state` is derived here
 * from the columns that held it before: `upto_state` when set, else `status`, except that a failed
 * payment the gateway let go of for a reason of its own becomes `released`, with `release_kind`
 * saying why. Those were recognised by the exact English text of their failure_reason; the texts
 * below are a frozen copy of the messages as they were written until now (a migration must not
 * change when today's messages are reworded). failure_reason stays, as the human text only.
 * `status` and `upto_state` stay as projections of `state` (see states.ts for why).
 */
const RELEASED_TEXTS: Record<string, string> = {
  'recorded but never sent (the gateway stopped before sending it); send the same payment again': 'never_sent',
  'the settlement was sent but dropped by the chain before it was mined; send the same payment again': 'dropped',
  'facilitator unavailable during verify': 'unavailable',
  'facilitator unavailable during settle': 'unavailable',
};

const STATES = ['pending', 'submitted', 'credited', 'failed', 'released', 'holding', 'settling', 'settled', 'unsettled', 'written_off'];
const RELEASE_KINDS = ['never_sent', 'dropped', 'unavailable', 'refused_by_node'];

const inList = (values: string[]) => sql.join(values.map((v) => sql.lit(v)));

export function paymentState() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .alterTable('payments')
        .addColumn('state', 'text', (c) =>
          c
            .notNull()
            .defaultTo('pending')
            .check(sql`state in (${inList(STATES)})`),
        )
        .execute();
      await db.schema
        .alterTable('payments')
        .addColumn('release_kind', 'text', (c) => c.check(sql`release_kind in (${inList(RELEASE_KINDS)})`))
        .execute();
      await sql`update payments set state = coalesce(upto_state, status)`.execute(db);
      for (const [text, kind] of Object.entries(RELEASED_TEXTS)) {
        await sql`update payments set state = 'released', release_kind = ${kind}
          where status = 'failed' and upto_state is null and failure_reason = ${text}`.execute(db);
      }
      await db.schema.createIndex('payments_state').on('payments').columns(['state', 'updated_at']).execute();
    },
  };
}
