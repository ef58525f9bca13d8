import { clientBucket } from '../client-bucket.ts';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import { toIso } from '../../keys/api-keys.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { requireWalletOwner } from '../auth/wallet-auth.ts';
import type { PaymentRow } from '../../payments/payment-row.ts';

/** At most this many top-ups, newest first. */
const HISTORY_LIMIT = 200;

/**
 * An x402 upto payment credits nothing to the wallet (its maximum is held for its request, then
 * exactly the charge is settled): its status is where its settle stands, and `charged_usdc` what
 * it settles, once known. `amount_usdc` stays the signed maximum. (The micro-USDC are computed here
 * rather than with payment-terms.ts, which would load the x402 code into every gateway at start.)
 */
function uptoView(p: PaymentRow) {
  if (p.upto_state === null) return {};
  const charged =
    p.settle_amount_atomic === null || p.token_decimals === null ? null : Number(BigInt(p.settle_amount_atomic) / 10n ** BigInt(p.token_decimals - 6));
  return { scheme: 'upto', status: p.upto_state, credited_usdc: 0, charged_usdc: charged, reason: p.upto_state === 'settled' ? null : p.failure_reason };
}

/** GET /v1/topups/:wallet: the wallet's credited and pending top-ups (same auth as usage). */
export function topupHistoryRoutes(app: FastifyInstance, services: Services): void {
  app.get<{ Params: { wallet: string } }>('/v1/topups/:wallet', async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    const wallet = await requireWalletOwner(services, request);
    const rows = await services.storage.db
      .selectFrom('payments')
      .selectAll()
      .where('payer', '=', wallet)
      .where('status', '!=', 'failed')
      .orderBy('created_at', 'desc')
      .limit(HISTORY_LIMIT)
      .execute();
    return {
      wallet,
      topups: rows.map((p) => ({
        id: p.id,
        status: p.status === 'credited' ? 'credited' : 'pending',
        credited_usdc: p.status === 'credited' ? Number(p.amount_usdc) : 0,
        amount_usdc: Number(p.amount_usdc),
        amount: p.amount_atomic,
        asset: p.asset,
        network: p.network,
        transfer_method: p.transfer_method,
        transaction: p.tx_hash,
        created_at: toIso(Number(p.created_at)),
        credited_at: toIso(p.credited_at === null ? null : Number(p.credited_at)),
        ...uptoView(p),
      })),
    };
  });
}
