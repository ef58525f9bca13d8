import type { Command } from 'commander';
import { toIso, type KeyRow } from '../keys/api-keys.ts';
import type { LimitInput } from '../keys/key-limits.ts';
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

/** The options as the API's fields; only what was given (undefined leaves a field as it is). */
export function limitInputFrom(o: LimitOptions): LimitInput {
  const input: LimitInput = {};
  if (o.limitUsd !== undefined) {
    if (o.limitUsd === 'none') input.spend_limit_usdc = null;
    else {
      try {
        input.spend_limit_usdc = usdToMicro(o.limitUsd);
      } catch (err) {
        throw new UsageError(`--limit-usd: ${(err as Error).message}`);
      }
    }
  }
  if (o.period !== undefined) input.spend_limit_period = o.period;
  if (o.models !== undefined)
    input.models =
      o.models === 'all'
        ? null
        : o.models
            .split(',')
            .map((m) => m.trim())
            .filter(Boolean);
  if (o.expires !== undefined) input.expires_at = o.expires === 'never' ? null : o.expires;
  return input;
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
