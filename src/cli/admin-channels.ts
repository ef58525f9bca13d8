import type { Command } from 'commander';
import { withStorage, type CommonOptions } from './context.ts';
import { UsageError } from './usage-error.ts';

/**
 * `tollgate admin channels [--claim]`: the x402 batch-settlement channels paying this gateway, the
 * most unclaimed first (amounts in micro-USDC), and with `--claim` one claim pass now over every
 * channel with unclaimed charges, whatever the threshold and age, then the settle
 * (src/payments/channels/claims/claim-pass.ts). It takes the claimer's lease like an instance does:
 * while a running gateway's claimer holds it, nothing is sent and the command says so.
 */
export function registerAdminChannels(admin: Command, common: () => CommonOptions): void {
  admin
    .command('channels')
    .description('list x402 batch-settlement channels (charged, claimed, balance, withdrawal); --claim claims them now')
    .option('--claim', 'claim every channel with unclaimed charges now, then settle to the receiver')
    .option('--limit <n>', 'channels listed', '100')
    .action(async (opts: { claim?: boolean; limit: string }) => {
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit <= 0) throw new UsageError('--limit must be a positive whole number of channels');
      await withStorage(common(), async (s, config) => {
        if (opts.claim) await claimNow(s, config);
        const { listChannels } = await import('../payments/channels/claims/claim-store.ts');
        const rows = await listChannels(s.db, limit);
        if (rows.length === 0) process.stdout.write('no channels\n');
        for (const c of rows) {
          const withdrawal =
            c.withdraw_requested_at === 0
              ? 'none'
              : `started ${new Date(c.withdraw_requested_at * 1000).toISOString()}, completes ${new Date((c.withdraw_requested_at + c.withdraw_delay) * 1000).toISOString()}`;
          process.stdout.write(
            `${c.channel_id} payer ${c.payer} charged ${c.charged_usdc} claimed ${c.total_claimed_usdc} unclaimed ${c.charged_usdc - c.total_claimed_usdc} ` +
              `balance ${c.balance_usdc} deposited ${c.deposited_usdc} refunded ${c.refunded_usdc} withdrawal ${withdrawal}\n`,
          );
        }
      });
    });
}

type WithStorageArgs = Parameters<Parameters<typeof withStorage>[1]>;

async function claimNow(s: WithStorageArgs[0], config: WithStorageArgs[1]): Promise<void> {
  if (!config.payPerRequest.batchSettlement.enabled) throw new UsageError('payPerRequest.batchSettlement is not enabled: there are no channels to claim');
  if (config.topup.offers.length === 0) throw new UsageError('no topup.offers are configured, so there is no facilitator to claim with');
  const [{ runClaimPass, CLAIM_LEASE }, { createFacilitator }, { relayerLockFor }, { createChainReaders }, { chainIdOf }, { randomUUID }] = await Promise.all([
    import('../payments/channels/claims/claim-pass.ts'),
    import('../payments/service.ts'),
    import('../payments/relayer/relayer-lock.ts'),
    import('../chain/readers.ts'),
    import('../payments/match.ts'),
    import('node:crypto'),
  ]);
  const readers = await createChainReaders(config.chains);
  const clientFor = (network: string) => (readers.has(chainIdOf(network)) ? readers.client(chainIdOf(network)) : undefined);
  const facilitator = createFacilitator(config, relayerLockFor(s.engine, s.db, config.topup.relayer.sendWaitSeconds * 1000));
  const logger = { info: () => {}, warn: (obj: object, msg: string) => process.stderr.write(`${msg} ${JSON.stringify(obj)}\n`) };
  const { namedLease } = await import('../retention/job-lease.ts');
  const lease = namedLease(s.db, CLAIM_LEASE);
  const deps = { db: s.db, lease, facilitator, clientFor, config: config.payPerRequest.batchSettlement, logger, now: Date.now };
  const holder = `admin-cli-${randomUUID()}`;
  const outcome = await runClaimPass(deps, { holder, force: true });
  if (!outcome.ran) throw new UsageError("another instance's claimer holds the lease and claims every claimIntervalSeconds; try again after its pass");
  await lease.release(holder);
  for (const c of outcome.claims) process.stdout.write(`claimed ${c.channels.length} channels in ${c.transaction}\n`);
  for (const tx of outcome.settles) process.stdout.write(`settled to the receiver in ${tx}\n`);
  for (const f of outcome.failures) process.stdout.write(`failed: ${f}\n`);
  for (const u of outcome.unresolved)
    process.stdout.write(`unresolved: channel ${u.channel}: its refund nonce ${u.nonce} landed, its event not found (${u.searchFailure})\n`);
  const problems = outcome.failures.length + outcome.unresolved.length;
  if (outcome.claims.length === 0 && problems === 0) process.stdout.write('nothing to claim\n');
  if (problems > 0) process.exitCode = 1;
}
