import { ADDRESS_PATTERN } from '../chain/address.ts';
import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import type { Command } from 'commander';
import { microToUsd, usdToMicro } from '../ledger/usd.ts';
import type { Storage } from '../storage/database.ts';
import { addLimitOptions, describeLimits, limitInputFrom, type LimitOptions } from './key-limit-options.ts';
import { withStorage, type CommonOptions } from './context.ts';
import { UsageError } from './usage-error.ts';
import { registerAdminUpto } from './admin-upto.ts';
import { registerAdminChannels } from './admin-channels.ts';

/**
 * What the commands run, loaded when one runs: `tollgate --help` then needs neither Kysely and the
 * ledger nor x402's chain code.
 */
async function lib() {
  const [balances, credits, constraintErrors, invariants, readers, audit, match, keys, codes, spend, limits, catalog] = await Promise.all([
    import('../ledger/balances.ts'),
    import('../ledger/movements.ts'),
    import('../storage/constraint-errors.ts'),
    import('../ledger/invariants.ts'),
    import('../chain/readers.ts'),
    import('../payments/audit.ts'),
    import('../payments/match.ts'),
    import('../keys/api-keys.ts'),
    import('../codes/codes.ts'),
    import('../keys/current-spend.ts'),
    import('../keys/key-limits.ts'),
    import('../providers/catalog.ts'),
  ]);
  return { ...balances, ...credits, ...constraintErrors, ...invariants, ...readers, ...audit, ...match, ...keys, ...codes, ...spend, ...limits, ...catalog };
}

function wallet(raw: string): string {
  if (!ADDRESS_PATTERN.test(raw)) throw new UsageError(`"${raw}" is not a wallet address (0x followed by 40 hex digits)`);
  return raw.toLowerCase();
}

function usd(raw: string): number {
  try {
    return usdToMicro(raw);
  } catch (err) {
    throw new UsageError(`--usd: ${(err as Error).message}`);
  }
}

function keyId(raw: string): number {
  if (!/^\d{1,15}$/.test(raw) || Number(raw) < 1)
    throw new UsageError(`the key id must be a positive integer (see "tollgate admin wallet <address>"), got "${raw}"`);
  return Number(raw);
}

/** Why the operator's change was not made (the operator may loosen, so never 'loosens'). */
function adminRefusal(id: number, outcome: { reason: string; message?: string }): string {
  if (outcome.reason === 'invalid') return outcome.message!;
  if (outcome.reason === 'contended') return `key #${id}'s limits kept changing while this change was made; nothing was changed, run it again`;
  return `key #${id} is ${outcome.reason === 'revoked' ? 'revoked' : 'unknown'}; nothing was changed`;
}

async function describeKey(s: Storage, id: number): Promise<string[]> {
  const { findKeyById, currentSpend, toIso } = await lib();
  const key = await findKeyById(s.db, id);
  if (!key) throw new UsageError(`no API key #${id}`);
  const spend = (await currentSpend(s.db, [key])).get(id)!;
  const now = Date.now();
  const status =
    key.revoked_at !== null
      ? `revoked ${toIso(key.revoked_at)}`
      : key.expires_at !== null && key.expires_at <= now
        ? `expired ${toIso(key.expires_at)}`
        : 'active';
  return [
    `key        #${key.id}  ${key.prefix}…${key.last4}  ${JSON.stringify(key.label)}`,
    `wallet     ${key.wallet}`,
    `status     ${status}  (created ${toIso(key.created_at)})`,
    ...describeLimits(key),
    `spent      $${microToUsd(spend.spentUsdc)} ${key.spend_limit_period === null || key.spend_limit_period === 'total' ? 'in total' : 'this period'} ($${microToUsd(spend.reservedUsdc)} reserved in flight)${spend.resetsAt === null ? '' : `, resets ${toIso(spend.resetsAt)}`}`,
  ];
}

/** Operator commands. They talk to the database directly, so they work while the server is down too. */
export function registerAdmin(program: Command, common: () => CommonOptions): void {
  const admin = program.command('admin').description('operator commands (direct database access)');
  registerAdminUpto(admin, common);
  registerAdminChannels(admin, common);

  admin
    .command('redeem-codes')
    .description('manage redeem codes')
    .command('create')
    .description('create one-time codes that credit a wallet when used with POST /v1/auth/keys')
    .requiredOption('--usd <amount>', 'value of each code in USD')
    .option('--count <n>', 'how many codes', '1')
    .action(async (opts: { usd: string; count: string }) => {
      const value = usd(opts.usd);
      const count = Number(opts.count);
      if (value <= 0) throw new UsageError('--usd must be positive');
      if (!Number.isInteger(count) || count < 1 || count > 10_000) throw new UsageError('--count must be a whole number from 1 to 10000');
      const { createRedeemCodes } = await lib();
      const codes = await withStorage(common(), (s) => createRedeemCodes(s.db, value, count));
      process.stderr.write(`created ${count} redeem code(s) worth $${microToUsd(value)} each; they are shown only now:\n`);
      process.stdout.write(`${codes.join('\n')}\n`);
    });

  admin
    .command('ref-codes')
    .description('manage referral codes')
    .command('create')
    .description('create a referral code for a referrer wallet')
    .requiredOption('--wallet <address>', 'the referrer wallet')
    .action(async (opts: { wallet: string }) => {
      const { createReferralCode } = await lib();
      const code = await withStorage(common(), (s) => createReferralCode(s.db, wallet(opts.wallet)));
      process.stdout.write(`${code}\n`);
    });

  admin
    .command('wallet <address>')
    .description('show a wallet: balance, locked amount, keys and recent ledger entries')
    .option('--entries <n>', 'how many recent ledger entries', '20')
    .action(async (address: string, opts: { entries: string }) => {
      const addr = wallet(address);
      const { getBalance, listKeys, toIso } = await lib();
      await withStorage(common(), async (s) => {
        const balance = await getBalance(s.db, addr);
        const keys = await listKeys(s.db, addr);
        const entries = await s.db
          .selectFrom('ledger_entries')
          .selectAll()
          .where('wallet', '=', addr)
          .orderBy('id', 'desc')
          .limit(Math.max(1, Number(opts.entries) || 20))
          .execute();
        const out = [
          `wallet     ${addr}`,
          `balance    $${microToUsd(balance.balance_usdc)} (${balance.balance_usdc} micro-USDC)`,
          `locked     $${microToUsd(balance.locked_usdc)}`,
          `available  $${microToUsd(balance.available_usdc)}`,
          `keys       ${keys.length} (${keys.filter((k) => k.revoked_at === null).length} active)`,
          ...keys.map(
            (k) =>
              `  #${k.id}  ${k.prefix}…${k.last4}  ${JSON.stringify(k.label)}  created ${toIso(k.created_at)}${k.revoked_at ? `  revoked ${toIso(k.revoked_at)}` : ''}`,
          ),
          `ledger     ${entries.length} most recent`,
          ...entries.map((e) =>
            `  #${e.id}  ${toIso(e.created_at)}  ${e.kind.padEnd(14)} ${microToUsd(Number(e.amount_usdc)).padStart(14)}  ${e.reference ?? ''} ${e.note ?? ''}`.trimEnd(),
          ),
        ];
        process.stdout.write(`${out.join('\n')}\n`);
      });
    });

  const keys = admin.command('keys').description("show and change an API key's limits (for support)");
  keys
    .command('show <key_id>')
    .description("a key's owner, status, limits and spend in its current period")
    .action(async (raw: string) => {
      const id = keyId(raw);
      await withStorage(common(), async (s) => process.stdout.write(`${(await describeKey(s, id)).join('\n')}\n`));
    });
  addLimitOptions(
    keys
      .command('limit <key_id>')
      .description("change a key's spend limit, model list or expiry; takes effect at once (models and expiry within 5 s on other instances)"),
  ).action(async (raw: string, opts: LimitOptions) => {
    const id = keyId(raw);
    await withStorage(common(), async (s, config) => {
      const { parseLimitInput, buildCatalog, updateKeyLimits } = await lib();
      const parsed = parseLimitInput(limitInputFrom(opts), buildCatalog(config), Date.now());
      if (!parsed.ok) throw new UsageError(parsed.reason);
      if (!Object.keys(parsed.value).length) throw new UsageError('give at least one of --limit-usd, --period, --models, --expires');
      // The operator may loosen: this is the support path, with direct database access anyway.
      const outcome = await updateKeyLimits(s.db, id, null, parsed.value, true);
      if (!outcome.ok) throw new UsageError(adminRefusal(id, outcome));
      process.stdout.write(`changed key #${id}\n${(await describeKey(s, id)).join('\n')}\n`);
    });
  });

  admin
    .command('credit <address>')
    .description('adjust a wallet balance (negative to debit); recorded in the ledger with the reason and operator')
    .requiredOption('--usd <amount>', 'USD to add (use --usd=-5 to remove)')
    .requiredOption('--reason <text>', 'why; kept in the ledger for audit')
    .action(async (address: string, opts: { usd: string; reason: string }) => {
      const addr = wallet(address);
      const amount = usd(opts.usd);
      if (amount === 0) throw new UsageError('--usd must not be zero');
      if (!opts.reason.trim()) throw new UsageError('--reason must say why');
      const reference = `admin:${randomUUID()}`;
      const note = `${opts.reason.trim()} (by ${userInfo().username})`;
      const { adjustBalance, getBalance, isBalanceConstraintError } = await lib();
      await withStorage(common(), async (s) => {
        try {
          await adjustBalance(s.db, { wallet: addr, amountUsdc: amount, reference, note });
        } catch (err) {
          if (isBalanceConstraintError(err))
            throw new UsageError('that debit would take the balance below zero or below the locked amount; nothing was changed');
          throw err;
        }
        const balance = await getBalance(s.db, addr);
        process.stdout.write(`adjusted ${addr} by $${microToUsd(amount)}; balance now $${microToUsd(balance.balance_usdc)} (${reference})\n`);
      });
    });

  admin
    .command('ledger-check')
    .description('verify the money invariants; exits 1 when any fails')
    .option('--chain', "also re-read every credited top-up's settling transaction from the configured RPCs")
    .option('--full', 'check all history, not only what came after the last checkpoint (stores no checkpoint)')
    .action(async (opts: { chain?: boolean; full?: boolean }) => {
      const { auditCreditsOnChain, chainIdOf, createChainReaders } = await lib();
      const { runLedgerCheck, describeCheckpoints } = await import('../ledger/checkpoints/run-check.ts');
      const result = await withStorage(common(), async (s, config) => {
        const ledger = await runLedgerCheck(s.db, { full: opts.full === true });
        if (!opts.chain) return { ...ledger, chain: null };
        const readers = await createChainReaders(config.chains);
        const chain = await auditCreditsOnChain(s.db, (network) => (readers.has(chainIdOf(network)) ? readers.client(chainIdOf(network)) : undefined));
        return { ...ledger, ok: ledger.ok && chain.problems.length === 0, problems: [...ledger.problems, ...chain.problems], chain };
      });
      process.stdout.write(
        `wallets ${result.wallets}, ledger entries ${result.entries}, credits $${microToUsd(result.creditsUsdc)}, charges $${microToUsd(result.chargesUsdc)}\n`,
      );
      process.stdout.write(`${describeCheckpoints(result)}\n`);
      if (result.chain) {
        const skipped = result.chain.skipped ? `, ${result.chain.skipped} skipped (no RPC configured for their network)` : '';
        process.stdout.write(`chain: ${result.chain.checked} credited payments re-read${skipped}\n`);
      }
      if (result.findings.length) {
        process.stdout.write(`findings (the books balance, but look at these):\n${result.findings.map((f) => `  ${f}`).join('\n')}\n`);
      }
      if (result.ok) {
        process.stdout.write('ledger OK\n');
        return;
      }
      process.stdout.write(`ledger check FAILED:\n${result.problems.map((p) => `  ${p}`).join('\n')}\n`);
      process.exitCode = 1;
    });
}
