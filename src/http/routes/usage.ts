import { clientBucket } from '../client-bucket.ts';
import type { FastifyInstance } from 'fastify';
import { getBalance } from '../../ledger/balances.ts';
import { usageByKey } from '../../keys/usage.ts';
import type { Services } from '../../services.ts';
import { requireWalletOwner } from '../wallet-auth.ts';
import { toIso } from '../../keys/api-keys.ts';
import { enforceRateLimit } from '../rate-limit.ts';

export function usageRoutes(app: FastifyInstance, services: Services): void {
  app.get<{ Params: { wallet: string } }>('/v1/usage/:wallet', async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    const wallet = await requireWalletOwner(services, request);
    const [balance, keys] = await Promise.all([getBalance(services.storage.db, wallet), usageByKey(services.storage.db, wallet)]);
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
}
