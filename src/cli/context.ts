import type { Config } from '../config/schema.ts';
import type { Storage } from '../storage/database.ts';

// Its own file so that modules needing only the error do not load the configuration and storage code.
export { UsageError } from './usage-error.ts';
import { explainStartupFailures } from './startup-failure.ts';

/** Options every command takes. */
export interface CommonOptions {
  config?: string;
}

/** Loads the configuration; its code (zod, YAML) is loaded here, when a command needs it, not for `--help`. */
export async function configFrom(opts: CommonOptions): Promise<Config> {
  const { loadConfig } = await import('../config/load.ts');
  return loadConfig({ path: opts.config });
}

/** Opens the configured database, migrated, for the admin commands; always closes it. */
export async function withStorage<T>(opts: CommonOptions, fn: (storage: Storage, config: Config) => Promise<T>): Promise<T> {
  const config = await configFrom(opts);
  const [{ openStorage }, { migrateToLatest }] = await Promise.all([import('../storage/database.ts'), import('../storage/migrate.ts')]);
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
