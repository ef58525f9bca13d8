import type { Command } from 'commander';
import { DEFAULT_GATEWAY_URL, GATEWAY_URL_ENV, SIWE_DOMAIN_ENV, walletEnv } from '../config/wallet-env.ts';
import { microToUsd } from '../ledger/usd.ts';
import type { GatewayClient } from '../gateway-client/gateway-client.ts';
import type { TransferMethod } from '../gateway-client/topup-client.ts';
import { UsageError } from './usage-error.ts';
import { addLimitOptions, describeLimits, limitInputFrom, type LimitOptions } from './key-limit-options.ts';
import { topupProgress } from '../terminal/progress.ts';

interface WalletOptions {
  gateway?: string;
  siweDomain?: string;
  json?: boolean;
}

/**
 * `tollgate wallet …`: the wallet owner's side, over the public HTTP API only (it needs no config
 * file and no database). The private key comes from TOLLGATE_WALLET_KEY.
 */
export function registerWallet(program: Command): void {
  const wallet = program
    .command('wallet')
    .description('fund a balance and manage API keys as a wallet owner (private key from $TOLLGATE_WALLET_KEY)')
    .option('--gateway <url>', `gateway base URL (default: $${GATEWAY_URL_ENV}, then ${DEFAULT_GATEWAY_URL})`)
    .option('--siwe-domain <domain>', `the gateway's SIWE domain, when its URL here is not its public one (default: $${SIWE_DOMAIN_ENV}, then the URL's host)`)
    .option('--json', 'print machine-readable JSON');
  const opts = () => wallet.opts<WalletOptions>();
  const run = (fn: (client: GatewayClient, o: WalletOptions) => Promise<void>) => async () => {
    // The client (viem, SIWE) is loaded when a command runs, not for `tollgate --help`.
    const { GatewayError } = await import('../gateway-client/gateway-client.ts');
    try {
      await fn(await clientFrom(opts()), opts());
    } catch (err) {
      // Refusals from the gateway are the user's to act on: show the code and the advice, no stack.
      if (err instanceof GatewayError) throw new UsageError(`${err.code}: ${err.message}`);
      throw err;
    }
  };

  wallet
    .command('new')
    .description('make a fresh wallet: print a new private key and its address (shown once, stored nowhere)')
    .action(async () => {
      const { generatePrivateKey, privateKeyToAccount } = await import('viem/accounts');
      const privateKey = generatePrivateKey();
      const address = privateKeyToAccount(privateKey).address;
      // Each line says what it holds: a newcomer must not credit the key or publish it as the address.
      // The warning goes to stderr, so the two lines (and `--json`, what scripts read) stay clean.
      process.stderr.write(NEW_WALLET_WARNING);
      print(opts(), { private_key: privateKey, address }, `private key  ${privateKey}\naddress      ${address}`);
    });

  wallet
    .command('address')
    .description('print the wallet address the key belongs to')
    .action(run(async (client) => print(opts(), { wallet: client.wallet }, client.wallet)));

  wallet
    .command('topup')
    .description('add USD to the balance by paying stablecoins over x402 (waits for the chain)')
    .requiredOption('--usd <amount>', 'amount in USD, e.g. 5')
    .option('--method <method>', 'eip3009 (USDC) or permit2 (USDT; approve Permit2 once first)')
    .action(async (o: { usd: string; method?: string }) => {
      const usd = Number(o.usd);
      if (!/^\d+(\.\d{1,6})?$/.test(o.usd) || !(usd > 0)) throw new UsageError(`--usd must be a positive amount such as 5 or 2.5, got "${o.usd}"`);
      if (o.method !== undefined && o.method !== 'eip3009' && o.method !== 'permit2')
        throw new UsageError(`--method must be eip3009 or permit2, got "${o.method}"`);
      await run(async (client, w) => {
        const { topUp } = await import('../gateway-client/topup-client.ts');
        const progress = topupProgress();
        try {
          const result = await topUp(client, usd, { method: o.method as TransferMethod | undefined, onProgress: progress.on });
          progress.finish();
          const balance = result.balance_usdc === null ? '' : `; balance $${microToUsd(result.balance_usdc)}`;
          print(w, result, `credited $${microToUsd(result.credited_usdc)}${balance}\ntransaction ${result.transaction ?? '(unknown)'} on ${result.network}`);
        } catch (err) {
          progress.finish();
          throw err;
        }
      })();
    });

  const keys = wallet.command('keys').description('create, list and revoke API keys (each call signs a fresh SIWE message)');
  addLimitOptions(keys.command('create').description('create an API key; its secret is printed once'))
    .option('--label <label>', 'a name to recognise the key by')
    .option('--redeem-code <code>', 'a redeem code (rc-…) from the operator: its value is credited to the wallet')
    .option('--ref-code <code>', 'a referral code (ref-…): records who referred this wallet')
    .action((o: LimitOptions & { label?: string; redeemCode?: string; refCode?: string }) => {
      const limits = limitInputFrom(o);
      return run(async (client, w) => {
        const key = await client.createKey(o.label, limits, { redeemCode: o.redeemCode, refCode: o.refCode });
        const credited =
          key.redeemed_credit_usdc === undefined ? '' : `\nthe redeem code credited $${microToUsd(key.redeemed_credit_usdc)} to ${client.wallet}`;
        print(w, key, `${key.key}\n(key id ${key.id}; store the key now, it is not shown again)${credited}`);
      })();
    });
  addLimitOptions(keys.command('update <id>').description("change a key's spend limit, model list or expiry")).action((id: string, o: LimitOptions) => {
    if (!/^\d+$/.test(id)) throw new UsageError(`the key id must be a positive integer (see "tollgate wallet keys list"), got "${id}"`);
    const limits = limitInputFrom(o);
    if (!Object.keys(limits).length) throw new UsageError('give at least one of --limit-usd, --period, --models, --expires');
    return run(async (client, w) => {
      const key = await client.updateKey(Number(id), limits);
      const spent = `spent      $${microToUsd(key.spend_usdc ?? 0)}${key.spend_resets_at ? ` this period, resets ${key.spend_resets_at}` : ' in total'}`;
      const shown = describeLimits({
        spend_limit_usdc: key.spend_limit_usdc ?? null,
        spend_limit_period: key.spend_limit_period ?? null,
        allowed_models: key.models ?? null,
        expires_at: key.expires_at ? Date.parse(key.expires_at) : null,
      });
      print(w, key, `updated key ${id}\n${[...shown, spent].join('\n')}`);
    })();
  });
  keys
    .command('list')
    .description("list the wallet's keys")
    .action(
      run(async (client, w) => {
        const list = await client.listKeys();
        const lines = list.map(
          (k) => `${String(k.id).padStart(5)}  ${k.revoked_at ? 'revoked' : 'active '}  …${k.last4 ?? '????'}  ${k.created_at}  ${k.label}`,
        );
        print(
          w,
          { data: list },
          list.length
            ? `   id  status   key    created                   label\n${lines.join('\n')}`
            : 'no keys yet: create one with "tollgate wallet keys create"',
        );
      }),
    );
  keys
    .command('revoke <id>')
    .description('revoke a key; it stops working within seconds on every instance')
    .action((id: string) => {
      if (!/^\d+$/.test(id)) throw new UsageError(`the key id must be a positive integer (see "tollgate wallet keys list"), got "${id}"`);
      return run(async (client, w) => {
        await client.revokeKey(Number(id));
        print(w, { revoked: true, id: Number(id) }, `revoked key ${id}`);
      })();
    });

  wallet
    .command('usage')
    .description('balance and per-key usage')
    .action(
      run(async (client, w) => {
        const u = await client.usage();
        const rows = u.keys.map(
          (k) =>
            `${String(k.api_key_id).padStart(5)}  ${String(k.request_count).padStart(8)}  ${String(k.total_prompt_tokens + k.total_completion_tokens).padStart(8)}  $${microToUsd(k.total_charged_usdc)}  ${k.label}${k.revoked_at ? ' (revoked)' : ''}`,
        );
        print(
          w,
          u,
          `wallet     ${u.wallet}\nbalance    $${microToUsd(u.balance_usdc)} (locked $${microToUsd(u.locked_usdc)}, available $${microToUsd(u.available_usdc)})\n` +
            (rows.length ? `\n   id  requests    tokens  charged  label\n${rows.join('\n')}` : '\nno keys yet'),
        );
      }),
    );

  wallet
    .command('topups')
    .description('top-up history, newest first')
    .action(
      run(async (client, w) => {
        const list = await client.topups();
        const lines = list.map((t) => `${String(t.id).padStart(5)}  ${t.status.padEnd(8)}  $${microToUsd(t.amount_usdc)}  ${t.transaction ?? ''}`);
        print(w, { topups: list }, lines.length ? lines.join('\n') : 'no top-ups yet: add funds with "tollgate wallet topup --usd 5"');
      }),
    );
}

export const NEW_WALLET_WARNING =
  'tollgate: this private key is shown once and stored nowhere. Whoever holds it holds the funds of its address ' +
  '(its stablecoins and its Tollgate balance): keep it somewhere safe, never paste it into a chat, a file under ' +
  'version control or a shared shell history. Use it as TOLLGATE_WALLET_KEY=0x… for tollgate wallet.\n';

async function clientFrom(o: WalletOptions): Promise<GatewayClient> {
  const env = walletEnv();
  if (!env.ok) throw new UsageError(env.problem);
  const url = o.gateway ?? env.gatewayUrl ?? DEFAULT_GATEWAY_URL;
  try {
    new URL(url);
  } catch {
    throw new UsageError(`--gateway must be a URL such as http://localhost:8080, got "${url}"`);
  }
  const [{ GatewayClient }, { privateKeyToAccount }] = await Promise.all([import('../gateway-client/gateway-client.ts'), import('viem/accounts')]);
  return new GatewayClient(url, privateKeyToAccount(env.privateKey), { siweDomain: o.siweDomain ?? env.siweDomain });
}

function print(o: WalletOptions, json: unknown, text: string): void {
  process.stdout.write(o.json ? `${JSON.stringify(json)}\n` : `${text}\n`);
}
