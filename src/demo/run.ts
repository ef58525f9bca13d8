import { createPrinter } from './printer.ts';
import { startDemoStack, Teardown } from './stack.ts';
import { DemoStepFailed } from './demo-step.ts';
import { walkThrough } from './walkthrough.ts';

export interface DemoOptions {
  /** Leave everything running afterwards, and print what is needed to use it. */
  keep?: boolean;
  /** Gateway port (default: a free one). */
  port?: number;
}

/**
 * `tollgate demo`: starts the whole stack offline, walks a scripted client through it, checks the
 * ledger, and stops everything, also on Ctrl-C. Resolves with the process exit code.
 */
export async function runDemo(opts: DemoOptions = {}): Promise<number> {
  const print = createPrinter();
  const teardown = new Teardown();
  const started = Date.now();
  let interrupted: (() => void) | undefined;
  const onSignal = () => {
    process.stdout.write('\nstopping the demo stack …\n');
    // While --keep waits, the main flow stops the stack (finally below) and the caller exits after
    // it. Exiting here as well raced that: the process ended before the temporary folder was gone.
    if (interrupted) return interrupted();
    void teardown.run().then(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    print.title('Tollgate demo: a local chain, a fake provider and the gateway, all on 127.0.0.1');
    const stack = await startDemoStack(print.step, teardown, { port: opts.port });
    const { client } = await walkThrough(stack, print);
    print.title(`Demo finished in ${((Date.now() - started) / 1000).toFixed(1)}s: every step gave the expected result.`);

    if (!opts.keep) return 0;
    const key = await client.createKey('playground');
    const url = stack.gateway.url;
    print.title('The stack keeps running (Ctrl-C stops it). Try it:');
    print.detail(
      [
        `dashboard        ${url}/   (choose "the demo wallet": it signs with the test wallet below)`,
        `gateway          ${url}   (API docs: ${url}/openapi.json, agent guide: ${url}/llms.txt)`,
        `chain (anvil)    ${stack.anvil.rpcUrl}   chain id ${stack.anvil.chainId}, USDC at ${stack.chain.usdc}`,
        `fake provider    ${stack.provider.url}`,
        `gateway log      ${stack.logFile}`,
        '',
        `test wallet      ${stack.wallet.address}`,
        `its private key  ${stack.wallet.privateKey}   (a throw-away key for this local chain only)`,
        `API key          ${key.key}`,
        '',
        `curl ${url}/v1/chat/completions -H "Authorization: Bearer ${key.key}" -H "content-type: application/json" \\`,
        `  -d '{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}'`,
        `curl -H "Authorization: Bearer ${key.key}" ${url}/v1/usage/${stack.wallet.address}`,
        `TOLLGATE_WALLET_KEY=${stack.wallet.privateKey} npx tollgate wallet --gateway ${url} topup --usd 2`,
      ].join('\n'),
    );
    await new Promise<void>((resolve) => (interrupted = resolve));
    return 130;
  } catch (err) {
    const reason = err instanceof DemoStepFailed ? err.message : ((err as Error).stack ?? String(err));
    process.stdout.write(`\nThe demo stopped: ${reason}\n`);
    return 1;
  } finally {
    await teardown.run();
    process.stdout.write('stopped the chain, the provider and the gateway, and removed the temporary folder.\n');
  }
}
