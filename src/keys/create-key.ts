import type { Kysely } from 'kysely';
import type { Engine } from '../storage/database.ts';
import type { Database } from '../storage/schema.ts';
import { lockWallet } from '../ledger/balances.ts';
import { applyMovement } from '../ledger/movements.ts';
import { countActiveKeys, generateKey, insertKey, type KeyRow } from './api-keys.ts';
import { attributeReferral, claimRedeemCode } from '../codes/codes.ts';
import type { KeyLimits } from './limits.ts';

export interface CreateKeyRequest {
  wallet: string;
  label: string;
  refCode?: string;
  redeemCode?: string;
  limits?: KeyLimits;
}

export type CreateKeyOutcome = { ok: true; key: string; row: KeyRow; redeemedCreditUsdc?: number } | { ok: false; reason: string };

/** Thrown inside the transaction to roll it back; turned into an outcome outside. */
class Refusal extends Error {}

/**
 * Creates an API key, and in the same transaction redeems a code or records a referral. Either all
 * of it happens or none: a bad code leaves no key, and a key cap reached leaves the code unused.
 */
export async function createApiKey(db: Kysely<Database>, engine: Engine, secret: Buffer, maxActive: number, req: CreateKeyRequest): Promise<CreateKeyOutcome> {
  const wallet = req.wallet.toLowerCase();
  try {
    return await db.transaction().execute(async (trx) => {
      await lockWallet(trx, engine, wallet);
      if ((await countActiveKeys(trx, wallet)) >= maxActive) {
        throw new Refusal(`this wallet already has ${maxActive} active API keys, the most allowed; revoke one with DELETE /v1/auth/keys/:key_id first`);
      }
      let redeemedCreditUsdc: number | undefined;
      if (req.redeemCode !== undefined) {
        const claimed = await claimRedeemCode(trx, req.redeemCode, wallet);
        if (!claimed) throw new Refusal('redeem_code is unknown or has already been used');
        await applyMovement(trx, { wallet, kind: 'redeem', amountUsdc: claimed.valueUsdc, reference: `redeem:${claimed.id}`, note: 'redeem code' });
        redeemedCreditUsdc = claimed.valueUsdc;
      }
      if (req.refCode !== undefined) {
        const outcome = await attributeReferral(trx, wallet, req.refCode);
        if (outcome === 'unknown_code') throw new Refusal('ref_code is unknown');
        if (outcome === 'self_referral') throw new Refusal('ref_code belongs to this wallet; a wallet cannot refer itself');
      }
      const issued = generateKey(secret);
      const row = await insertKey(trx, wallet, issued, req.label, req.limits);
      return { ok: true as const, key: issued.key, row, redeemedCreditUsdc };
    });
  } catch (err) {
    if (err instanceof Refusal) return { ok: false, reason: err.message };
    throw err;
  }
}
