import { sql, type Kysely } from 'kysely';
import type { Engine } from '../database.ts';

/** Every kind a ledger entry may have; `upto_hold` and `upto_release` are src/ledger/operations/upto-hold.ts. */
export const LEDGER_KINDS = ['topup', 'redeem', 'referral_share', 'adjustment', 'charge', 'upto_hold', 'upto_release'] as const;

/**
 * The ledger learns the two kinds of an x402 `upto` hold. Rows already written keep their kinds
 * (docs/DECISIONS.md, "Upto holds are ledger operations"): the ledger is append-only by trigger, and
 * ledger-check reads both forms. PostgreSQL replaces the CHECK in place. SQLite cannot alter a
 * CHECK, so the table is rebuilt in one transaction: every row copied as it is (ids kept, so the
 * AUTOINCREMENT sequence continues), then its indexes and its append-only triggers made again.
 * DROP TABLE fires no DELETE trigger, and no table references ledger_entries. Measured: 10 s for a
 * million entries on a shared 2-core machine, once, at start-up.
 */
export function uptoLedgerKinds(engine: Engine) {
  return ledgerKindsMigration(engine, LEDGER_KINDS);
}

/** A migration that lets the ledger hold exactly `kinds` (this file's way: in place on PostgreSQL, a rebuild on SQLite). */
export function ledgerKindsMigration(engine: Engine, kinds: readonly string[]) {
  const check = `kind in (${kinds.map((k) => `'${k}'`).join(', ')})`;
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (engine === 'postgres') {
        await sql.raw(`alter table ledger_entries drop constraint ledger_kind_known, add constraint ledger_kind_known check (${check})`).execute(db);
        return;
      }
      await db.transaction().execute(async (trx) => {
        for (const statement of sqliteRebuild(check)) await sql.raw(statement).execute(trx);
      });
    },
  };
}

const COLUMNS = 'id, wallet, kind, amount_usdc, reference, note, created_at';

const sqliteRebuild = (kindCheck: string) => [
  `create table ledger_entries_next (
     id integer primary key autoincrement,
     wallet text not null references wallets (address),
     kind text not null,
     amount_usdc bigint not null,
     reference text,
     note text,
     created_at bigint not null,
     constraint ledger_kind_known check (${kindCheck}))`,
  `insert into ledger_entries_next (${COLUMNS}) select ${COLUMNS} from ledger_entries order by id`,
  'drop table ledger_entries',
  'alter table ledger_entries_next rename to ledger_entries',
  'create index ledger_entries_wallet on ledger_entries (wallet, id)',
  'create unique index ledger_entries_once on ledger_entries (kind, reference)',
  ...['UPDATE', 'DELETE'].map(
    (op) => `CREATE TRIGGER ledger_entries_no_${op.toLowerCase()} BEFORE ${op} ON ledger_entries
             BEGIN SELECT RAISE(ABORT, 'ledger_entries is append-only'); END`,
  ),
];
