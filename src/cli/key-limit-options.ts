import type { Command } from 'commander';
import { toIso, type KeyRow } from '../keys/api-keys.ts';
import { ISO_8601, type LimitInput } from '../keys/key-limits.ts';
import { SPEND_PERIODS } from '../ledger/spend-periods.ts';
import { microToUsd, usdToMicro } from '../ledger/usd.ts';
import { UsageError } from './context.ts';

/** The limit options `tollgate wallet keys create|update` and `tollgate admin keys limit` share. */
export interface LimitOptions {
  limitUsd?: string;
  period?: string;
  models?: string;
  expires?: string;
}

export function addLimitOptions(cmd: Command): Command {
  return cmd
    .option('--limit-usd <amount>', 'most the key may spend per period, in USD (e.g. 5 or 0.25); "none" removes the limit')
    .option('--period <period>', 'the period of the limit: total, day or month (UTC); default total')
    .option('--models <ids>', 'comma-separated model ids the key may use (see /v1/models); "all" allows every model')
    .option('--expires <time>', 'ISO 8601 time the key stops working (e.g. 2030-01-31T00:00:00Z); "never" removes the expiry');
}

/**
 * The options as the API's fields; only what was given (undefined leaves a field as it is). Their
 * form is checked here, in the flags' words: the API's messages name its fields and offer null,
 * which no flag takes. Which models exist and whether a time is in the future stay the API's to say.
 */
export function limitInputFrom(o: LimitOptions): LimitInput {
  const input: LimitInput = {};
  if (o.limitUsd !== undefined) input.spend_limit_usdc = o.limitUsd === 'none' ? null : spendLimit(o.limitUsd);
  if (o.period !== undefined) {
    if (!(SPEND_PERIODS as readonly string[]).includes(o.period)) throw new UsageError(`--period must be total, day or month (UTC); got "${o.period}"`);
    input.spend_limit_period = o.period;
  }
  if (o.models !== undefined && o.models !== 'all') {
    input.models = o.models
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean);
    if (!(input.models as string[]).length)
      throw new UsageError('--models must name at least one model id (see GET /v1/models), or be "all" to allow every model');
  } else if (o.models !== undefined) input.models = null;
  if (o.expires !== undefined && o.expires !== 'never' && (!ISO_8601.test(o.expires) || Number.isNaN(Date.parse(o.expires)))) {
    throw new UsageError(
      `--expires must be an ISO 8601 time such as 2030-01-31T00:00:00Z (a date alone is UTC midnight), or "never" to remove the expiry; got "${o.expires}"`,
    );
  }
  if (o.expires !== undefined) input.expires_at = o.expires === 'never' ? null : o.expires;
  return input;
}

function spendLimit(usd: string): number {
  let micro: number;
  try {
    micro = usdToMicro(usd);
  } catch (err) {
    throw new UsageError(`--limit-usd: ${(err as Error).message}`);
  }
  if (!(micro > 0)) throw new UsageError(`--limit-usd must be more than 0, such as 5 or 0.25, or "none" to remove the limit; got "${usd}"`);
  return micro;
}

/** A key's restrictions in words, one line each, for people. */
export function describeLimits(k: Pick<KeyRow, 'spend_limit_usdc' | 'spend_limit_period' | 'allowed_models' | 'expires_at'>): string[] {
  const period = { total: 'in total', day: 'per day (UTC)', month: 'per month (UTC)' }[k.spend_limit_period ?? 'total'];
  return [
    `limit      ${k.spend_limit_usdc === null ? 'none' : `$${microToUsd(k.spend_limit_usdc)} ${period}`}`,
    `models     ${k.allowed_models === null ? 'all' : k.allowed_models.join(', ')}`,
    `expires    ${k.expires_at === null ? 'never' : toIso(k.expires_at)}`,
  ];
}
