import { Migrator, type Migration, type MigrationResultSet } from 'kysely';
import type { Storage } from './database.ts';
import { foundation } from './migrations/001-foundation.ts';
import { payments } from './migrations/002-payments.ts';
import { paymentTerms } from './migrations/003-payment-terms.ts';
import { usageTotals } from './migrations/004-usage-totals.ts';
import { settleShortfalls } from './migrations/005-settle-shortfalls.ts';
import { keyLimits } from './migrations/006-key-limits.ts';
import { dashboard } from './migrations/007-dashboard.ts';
import { paymentPurpose } from './migrations/008-payment-purpose.ts';
import { storedResponses } from './migrations/009-stored-responses.ts';
import { usageDeployment } from './migrations/010-usage-deployment.ts';
import { paymentIdentifiers } from './migrations/011-payment-identifiers.ts';
import { paymentIdentifierHolder } from './migrations/012-payment-identifier-holder.ts';
import { uptoPayments } from './migrations/013-upto-payments.ts';
import { paymentState } from './migrations/014-payment-state.ts';
import { uptoLedgerKinds } from './migrations/015-upto-ledger-kinds.ts';
import { retention } from './migrations/016-retention.ts';
import { reservationUptoPayment } from './migrations/017-reservation-upto-payment.ts';
import { channels } from './migrations/018-channels.ts';
import { checkpointPeriods } from './migrations/019-checkpoint-periods.ts';
import { paymentRequestDigest } from './migrations/020-payment-request-digest.ts';
import { channelSpentVouchers } from './migrations/021-channel-spent-vouchers.ts';

/** Ordered by name; a new migration is a new file and a new line here, never an edit to an old one. */
function migrationsFor(storage: Storage): Record<string, Migration> {
  return {
    '001-foundation': foundation(storage.engine),
    '002-payments': payments(),
    '003-payment-terms': paymentTerms(),
    '004-usage-totals': usageTotals(),
    '005-settle-shortfalls': settleShortfalls(),
    '006-key-limits': keyLimits(),
    '007-dashboard': dashboard(),
    '008-payment-purpose': paymentPurpose(),
    '009-stored-responses': storedResponses(),
    '010-usage-deployment': usageDeployment(),
    '011-payment-identifiers': paymentIdentifiers(),
    '012-payment-identifier-holder': paymentIdentifierHolder(),
    '013-upto-payments': uptoPayments(),
    '014-payment-state': paymentState(),
    '015-upto-ledger-kinds': uptoLedgerKinds(storage.engine),
    '016-retention': retention(),
    '017-reservation-upto-payment': reservationUptoPayment(),
    '018-channels': channels(storage.engine),
    '019-checkpoint-periods': checkpointPeriods(),
    '020-payment-request-digest': paymentRequestDigest(),
    '021-channel-spent-vouchers': channelSpentVouchers(),
  };
}

export interface MigrateOutcome {
  applied: string[];
}

/**
 * Brings the schema up to date. Safe to run from several instances at once: Kysely takes a lock
 * (an advisory lock on PostgreSQL) so only one applies each migration.
 */
export async function migrateToLatest(storage: Storage): Promise<MigrateOutcome> {
  return outcomeOf(await migratorFor(storage).migrateToLatest());
}

/** Brings the schema up to migration `name` and no further: a migration's test fills the tables as they were before the next one. */
export async function migrateTo(storage: Storage, name: string): Promise<MigrateOutcome> {
  return outcomeOf(await migratorFor(storage).migrateTo(name));
}

function migratorFor(storage: Storage): Migrator {
  return new Migrator({
    db: storage.db,
    provider: { getMigrations: async () => migrationsFor(storage) },
  });
}

function outcomeOf(result: MigrationResultSet): MigrateOutcome {
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName;
    const cause = result.error instanceof Error ? result.error.message : String(result.error);
    // The cause is kept so the CLI can tell an unreachable database from a broken migration.
    throw new Error(`database migration${failed ? ` ${failed}` : ''} failed: ${cause}`, { cause: result.error });
  }
  return { applied: (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}
