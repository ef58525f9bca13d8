import type { Logger } from 'pino';
import { createChainReaders, type ChainReaders } from './chain/readers.ts';
import type { Config } from './config/load.ts';
import { resolveKeySecret } from './keys/hmac-secret.ts';
import { buildCatalog, type Catalog } from './providers/catalog.ts';
import { pruneNonces } from './siwe/nonce-store.ts';
import { SiweVerifier } from './siwe/verify.ts';
import { openStorage, type Storage } from './storage/database.ts';
import { migrateToLatest } from './storage/migrate.ts';

/** Everything a running gateway holds, built once from the configuration and shared by routes. */
export interface Services {
  config: Config;
  logger: Logger;
  storage: Storage;
  catalog: Catalog;
  chains: ChainReaders;
  siwe: SiweVerifier;
  keySecret: Buffer;
  close(): Promise<void>;
}

export interface ServiceOptions {
  logger: Logger;
  /** Clock override for tests of time windows. */
  now?: () => number;
  /** Run migrations first (the server does; tests of `tollgate migrate` do not). */
  migrate?: boolean;
}

export async function createServices(config: Config, opts: ServiceOptions): Promise<Services> {
  const storage = openStorage(config.database.url);
  try {
    if (opts.migrate !== false) {
      const { applied } = await migrateToLatest(storage);
      if (applied.length) opts.logger.info({ applied }, 'database migrated');
    }
    const keySecret = await resolveKeySecret(storage.db, config.secrets.keySecret);
    const chains = createChainReaders(config.chains);
    const siwe = new SiweVerifier(config.siwe, storage.db, chains, opts.now);

    const pruner = setInterval(() => {
      pruneNonces(storage.db).catch((err) => opts.logger.warn({ err }, 'pruning used SIWE nonces failed'));
    }, 60_000);
    pruner.unref();

    return {
      config,
      logger: opts.logger,
      storage,
      catalog: buildCatalog(config),
      chains,
      siwe,
      keySecret,
      async close() {
        clearInterval(pruner);
        await storage.close();
      },
    };
  } catch (err) {
    await storage.close().catch(() => undefined);
    throw err;
  }
}
