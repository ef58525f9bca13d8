import { Command, CommanderError } from 'commander';
import { registerAdmin } from './admin.ts';
import { registerWallet } from './wallet.ts';
import { registerDemo } from './demo.ts';
import { configFrom, type CommonOptions } from './context.ts';
import { UsageError } from './usage-error.ts';
import { explainStartupFailures } from './startup-failure.ts';
import { packageVersion } from './version.ts';
import { StartupError } from '../startup-error.ts';

// Only commander and the command definitions load up front; each command loads what it runs
// (the server, the database, viem, x402) when it runs, so `tollgate --help` starts in a fraction
// of a second. The catch at the end loads the configuration's error class the same way.

const program = new Command('tollgate')
  .description('Tollgate: a prepaid, wallet-funded, OpenAI-compatible LLM gateway')
  .version(packageVersion(), '-V, --version', 'print the version')
  .option('-c, --config <file>', 'configuration file (default: $TOLLGATE_CONFIG, then ./tollgate.yaml)')
  .showHelpAfterError('(run "tollgate --help" for the commands)')
  // Set before the subcommands are added so that they inherit it.
  .exitOverride();

const common = (): CommonOptions => program.opts<CommonOptions>();

program
  .command('serve', { isDefault: true })
  .description('run the gateway (migrates the database first)')
  .option(
    '--fake-providers',
    'also run built-in fake providers (models fake/canned-chat, fake-anthropic/canned-claude): canned answers, billed, for trying Tollgate without a provider account; never in production',
  )
  // As the default command, serve receives whatever word was not a command: it names that word
  // itself (commander would say "too many arguments for 'serve'" to someone who typed `tollgate keyz`).
  .allowExcessArguments()
  .action(async (opts: { fakeProviders?: boolean }, serve: Command) => {
    const stray = serve.args[0];
    if (stray !== undefined) {
      const commands = program.commands.map((c) => c.name()).join(', ');
      throw new UsageError(`"${stray}" is not a tollgate command; the commands are ${commands} (tollgate --help describes them)`);
    }
    const [{ runUntilSignalled }, config] = await Promise.all([import('../main.ts'), configFrom(common())]);
    if (!opts.fakeProviders) return explainStartupFailures(config, () => runUntilSignalled(config));
    const { fakeProvidersRefusal, startBuiltInFakes } = await import('../fake-providers/built-in.ts');
    const { fakeProvidersDatabaseRefusal } = await import('../fake-providers/database-refusal.ts');
    const refused = fakeProvidersRefusal(config, process.env) ?? (await fakeProvidersDatabaseRefusal(config.database.url));
    if (refused) throw new UsageError(refused);
    const fakes = await startBuiltInFakes(config);
    process.stderr.write(fakes.banner);
    await explainStartupFailures(fakes.config, () => runUntilSignalled(fakes.config)).finally(() => fakes.stop());
  });

program
  .command('migrate')
  .description('bring the database schema up to date and exit')
  .action(async () => {
    const config = await configFrom(common());
    const [{ openStorage }, { migrateToLatest }] = await Promise.all([import('../storage/database.ts'), import('../storage/migrate.ts')]);
    await explainStartupFailures(config, async () => {
      const storage = openStorage(config.database.url, { poolSize: 1 });
      try {
        const { applied } = await migrateToLatest(storage);
        process.stdout.write(applied.length ? `applied ${applied.join(', ')}\n` : 'database already up to date\n');
      } finally {
        await storage.close();
      }
    });
  });

program
  .command('facilitator')
  .description('serve the local x402 facilitator over HTTP, so several gateways can share one relayer key')
  .option('--host <host>', 'interface to listen on', '127.0.0.1')
  .option('--port <port>', 'port to listen on', '8402')
  .action(async (opts: { host: string; port: string }) => {
    const port = Number(opts.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number, got "${opts.port}"`);
    const [{ runFacilitatorUntilSignalled }, config] = await Promise.all([import('../main.ts'), configFrom(common())]);
    await explainStartupFailures(
      config,
      () => runFacilitatorUntilSignalled(config, { host: opts.host, port, token: process.env.TOLLGATE_FACILITATOR_TOKEN || undefined }),
      '--port',
    );
  });

registerAdmin(program, common);
registerWallet(program);
registerDemo(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // --help and --version exit 0; a mistyped command line is a usage error like any other: 2.
  if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
  const { ConfigError } = await import('../config/load.ts');
  if (err instanceof UsageError || err instanceof ConfigError || err instanceof StartupError) {
    process.stderr.write(`tollgate: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`tollgate: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
}
