import { clientBucket } from '../client-bucket.ts';
import type { FastifyInstance } from 'fastify';
import { walletUsage } from '../../usage/usage.ts';
import type { Services } from '../../services.ts';
import { requireWalletOwner } from '../auth/wallet-auth.ts';
import { toIso } from '../../keys/api-keys.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { dailyUsage } from '../../usage/usage-daily.ts';
import { badRequest } from '../../refusal.ts';

/** The longest history GET /v1/usage/:wallet/daily returns, in days. */
const MAX_DAYS = 90;

export function usageRoutes(app: FastifyInstance, services: Services): void {
  app.get<{ Params: { wallet: string } }>('/v1/usage/:wallet', async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    const wallet = await requireWalletOwner(services, request);
    const { balance, keys } = await walletUsage(services.storage.db, wallet);
    return {
      wallet,
      ...balance,
      keys: keys.map((k) => ({
        api_key_id: k.api_key_id,
        label: k.label,
        created_at: toIso(k.created_at),
        revoked_at: toIso(k.revoked_at),
        request_count: k.request_count,
        total_prompt_tokens: k.total_prompt_tokens,
        total_completion_tokens: k.total_completion_tokens,
        total_charged_usdc: k.total_charged_usdc,
        // The one float in the API, computed at the edge from integer micro-USDC.
        total_platform_revenue_usd: (k.total_charged_usdc - k.total_provider_cost_usdc) / 1_000_000,
      })),
    };
  });

  // Per UTC day and key, from running totals (the dashboard's chart). Same auth as the usage read.
  app.get<{ Params: { wallet: string } }>('/v1/usage/:wallet/daily', async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    const days = parseDays((request.query as Record<string, unknown> | undefined)?.days);
    const wallet = await requireWalletOwner(services, request);
    const { from, to, rows } = await dailyUsage(services.storage.db, wallet, days, services.now());
    return { wallet, days, from, to, data: rows };
  });
}

function parseDays(raw: unknown): number {
  if (raw === undefined) return 30;
  if (typeof raw !== 'string' || !/^\d{1,3}$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_DAYS) {
    throw badRequest(`days must be a whole number from 1 to ${MAX_DAYS}, for example ?days=30`);
  }
  return Number(raw);
}
