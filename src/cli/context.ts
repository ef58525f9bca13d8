import { loadConfig, type Config } from '../config/load.ts';
import { openStorage, type Storage } from '../storage/database.ts';
import { migrateToLatest } from '../storage/migrate.ts';
import { explainStartupFailures } from './startup-failure.ts';

/** Options every command takes. */
export interface CommonOptions {
  config?: string;
}

export function configFrom(opts: CommonOptions): Config {
  return loadConfig({ path: opts.config });
}

/** Opens the configured database, migrated, for the admin commands; always closes it. */
export async function withStorage<T>(opts: CommonOptions, fn: (storage: Storage, config: Config) => Promise<T>): Promise<T> {
  const config = configFrom(opts);
  const storage = await explainStartupFailures(config, async () => {
    const opened = openStorage(config.database.url, { poolSize: 2 });
    try {
      await migrateToLatest(opened);
      return opened;
    } catch (err) {
      await opened.close();
      throw err;
    }
  });
  try {
    return await fn(storage, config);
  } finally {
    await storage.close();
  }
}

/** A mistake the operator can fix: printed without a stack trace, exit code 2. */
export class UsageError extends Error {}
