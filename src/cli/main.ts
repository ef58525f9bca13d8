import { Command, CommanderError } from 'commander';
import { ConfigError } from '../config/load.ts';
import { runUntilSignalled } from '../main.ts';
import { openStorage } from '../storage/database.ts';
import { migrateToLatest } from '../storage/migrate.ts';
import { registerAdmin } from './admin.ts';
import { configFrom, UsageError, type CommonOptions } from './context.ts';

const program = new Command('tollgate')
  .description('Tollgate: a prepaid, wallet-funded, OpenAI-compatible LLM gateway')
  .option('-c, --config <file>', 'configuration file (default: $TOLLGATE_CONFIG, then ./tollgate.yaml)')
  .showHelpAfterError('(run "tollgate --help" for the commands)');

const common = (): CommonOptions => program.opts<CommonOptions>();

program
  .command('serve', { isDefault: true })
  .description('run the gateway (migrates the database first)')
  .action(async () => {
    await runUntilSignalled(configFrom(common()));
  });

program
  .command('migrate')
  .description('bring the database schema up to date and exit')
  .action(async () => {
    const config = configFrom(common());
    const storage = openStorage(config.database.url, { poolSize: 1 });
    try {
      const { applied } = await migrateToLatest(storage);
      process.stdout.write(applied.length ? `applied ${applied.join(', ')}\n` : 'database already up to date\n');
    } finally {
      await storage.close();
    }
  });

registerAdmin(program, common);

program.exitOverride();
try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) process.exit(err.exitCode);
  if (err instanceof UsageError || err instanceof ConfigError) {
    process.stderr.write(`tollgate: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`tollgate: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
