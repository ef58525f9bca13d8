import type { Command } from 'commander';
import { withStorage, type CommonOptions } from './context.ts';
import { UsageError } from './usage-error.ts';

/**
 * `tollgate admin upto retry|write-off <payment>`: an x402 upto payment whose settle failed after
 * its answer was delivered (listed by `tollgate admin ledger-check`) keeps its payer refused until
 * one of these runs (src/payments/upto/operator.ts).
 */
export function registerAdminUpto(admin: Command, common: () => CommonOptions): void {
  const upto = admin.command('upto').description('unsettled x402 upto payments (listed by ledger-check)');

  upto
    .command('retry <payment>')
    .description('settle an unsettled upto payment again, for the same amount (after the payer restored the Permit2 allowance or the funds)')
    .action(async (id: string) => {
      const [{ retryUpto }, { createFacilitator }, { createChainReaders }, { chainIdOf }] = await Promise.all([
        import('../payments/upto/operator.ts'),
        import('../payments/service.ts'),
        import('../chain/readers.ts'),
        import('../payments/match.ts'),
      ]);
      const outcome = await withStorage(common(), async (s, config) => {
        if (config.topup.offers.length === 0) throw new UsageError('no topup.offers are configured, so there is no facilitator to settle with');
        const readers = await createChainReaders(config.chains);
        const clientFor = (network: string) => (readers.has(chainIdOf(network)) ? readers.client(chainIdOf(network)) : undefined);
        const logger = { info: () => {}, warn: (obj: object, msg: string) => process.stderr.write(`${msg} ${JSON.stringify(obj)}\n`) };
        return retryUpto({ db: s.db, facilitator: createFacilitator(config), clientFor, logger, countUnsettled: () => {}, now: Date.now }, id);
      });
      if (outcome.kind === 'refused') throw new UsageError(outcome.message);
      const p = outcome.payment;
      process.stdout.write(
        `payment ${p.id}: ${p.upto_state}${p.tx_hash ? ` (${p.tx_hash})` : ''}${p.upto_state === 'settled' ? '' : `: ${p.failure_reason ?? 'the reconciler finishes it'}`}\n`,
      );
      if (p.upto_state === 'unsettled') process.exitCode = 1;
    });

  upto
    .command('write-off <payment>')
    .description('record an unsettled upto payment as a loss; its payer may pay again')
    .requiredOption('--reason <text>', 'why (kept with the payment)')
    .action(async (id: string, opts: { reason: string }) => {
      if (!opts.reason.trim()) throw new UsageError('--reason must say why the payment is written off');
      const { writeOffUpto } = await import('../payments/upto/operator.ts');
      const outcome = await withStorage(common(), (s) => writeOffUpto(s.db, id, opts.reason.trim()));
      if (outcome.kind === 'refused') throw new UsageError(outcome.message);
      process.stdout.write(`payment ${id}: written off (${outcome.payment.failure_reason})\n`);
    });
}
