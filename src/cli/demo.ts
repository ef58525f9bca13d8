import type { Command } from 'commander';
import { UsageError } from './context.ts';

export function registerDemo(program: Command): void {
  program
    .command('demo')
    .description('run the whole product offline: local chain with USDC, fake provider, gateway, and a scripted client')
    .option('--keep', 'leave the stack running afterwards and print its URLs, the test wallet key and an API key')
    .option('--port <port>', 'gateway port (default: a free one)')
    .action(async (opts: { keep?: boolean; port?: string }) => {
      const port = opts.port === undefined ? undefined : Number(opts.port);
      if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65535)) throw new UsageError(`--port must be a port number, got "${opts.port}"`);
      // Loaded only here: the demo needs the dev dependencies (anvil, the token contracts, openai).
      const { runDemo } = await import('../demo/run.ts').catch((err: Error) => {
        throw new UsageError(`the demo needs the dev dependencies; run "npm install" (not --omit=dev) first (${err.message})`);
      });
      const code = await runDemo({ keep: opts.keep, port });
      // Everything it started is stopped by now; client keep-alive sockets would only delay the exit.
      process.exit(code);
    });
}
