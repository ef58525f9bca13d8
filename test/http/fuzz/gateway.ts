import type { PaymentRequirements } from '@x402/core/types';
import { USDC_DOMAIN } from '../../../src/devchain/deploy.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../../src/fake-providers/fake-openai.ts';
import { adjustBalance } from '../../../src/ledger/movements.ts';
import type { Engine } from '../../../src/storage/database.ts';
import { contextLengthsOf, MODELS } from '../../support/chat-harness.ts';
import { createKeyProof, newAccount, siweProof } from '../../support/siwe.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { signEip3009, signPermit2 } from '../../support/x402-payloads.ts';
import type { SiweProofPair } from './proofs.ts';

/**
 * The gateway the fuzz run drives: chat on the fake provider, top-ups on the shared anvil chain,
 * rate limits out of the way (a 429 would hide the deeper paths), one funded wallet with a live
 * key and a revoked one, a pool of fresh SIWE proofs and valid signed 1 USD payments to mutate.
 */
export interface FuzzGateway {
  h: TopupHarness;
  fake: FakeOpenAI;
  wallet: string;
  fundedUsdc: number;
  key: string;
  revokedKey: string;
  proofs: SiweProofPair[];
  /** Decoded x402 v2 payment envelopes, valid for `{amount: 1}`. */
  payments: Record<string, unknown>[];
  stop(): Promise<void>;
}

const FUNDED_USDC = 10_000 * 1_000_000;

export async function startFuzzGateway(engine: Engine): Promise<FuzzGateway> {
  const fake = await startFakeOpenAI({ record: false, contextLengths: contextLengthsOf(MODELS) });
  let h: TopupHarness;
  try {
    h = await startTopupHarness(engine, {
      config: {
        providers: { fake: { baseUrl: fake.url }, other: { baseUrl: fake.url } },
        models: MODELS,
        rateLimits: {
          chat: { perMinute: 1_000_000, perDay: 10_000_000 },
          keys: { perMinute: 1_000_000 },
          public: { perMinute: 1_000_000 },
          authFailures: { perMinute: 1_000_000 },
        },
        keys: { maxActivePerWallet: 1_000 },
      },
    });
  } catch (err) {
    await fake.close();
    throw err;
  }
  const { app } = h.gw;
  const post = async (url: string, body: unknown) => {
    const res = await app.inject({ method: 'POST', url, payload: body as object });
    if (res.statusCode >= 300) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
    return res.json();
  };

  const owner = newAccount();
  const wallet = owner.address.toLowerCase();
  await adjustBalance(h.gw.services.storage.db, { wallet, amountUsdc: FUNDED_USDC, note: 'fuzz funding' });
  const { key } = await post('/v1/auth/keys', await createKeyProof(owner));
  const revoked = await post('/v1/auth/keys', await createKeyProof(owner));
  const del = await app.inject({ method: 'DELETE', url: `/v1/auth/keys/${revoked.id}`, payload: await siweProof(owner) });
  if (del.statusCode !== 200) throw new Error(`revoke: ${del.body}`);

  // Fresh proofs from a few wallets: a proof is good once, its replays are refused.
  const signers = Array.from({ length: 6 }, newAccount);
  const proofs = await Promise.all(Array.from({ length: 36 }, (_, i) => siweProof(signers[i % signers.length]!)));

  const payments = await signedPayments(h);
  return {
    h,
    fake,
    wallet,
    fundedUsdc: FUNDED_USDC,
    key,
    revokedKey: revoked.key,
    proofs,
    payments,
    async stop() {
      await h.stop();
      await fake.close();
    },
  };
}

/** Two valid 1 USD payments of each transfer method, by a funded payer (Permit2 approved). */
async function signedPayments(h: TopupHarness): Promise<Record<string, unknown>[]> {
  const accepts: PaymentRequirements[] = (await h.post({ amount: 1 })).body.accepts;
  const offer = (method: string) => accepts.find((o) => o.extra?.assetTransferMethod === method)!;
  const payer = await h.payer(10n);
  await h.chain.approvePermit2(payer, h.chain.usdt);
  const out: Record<string, unknown>[] = [];
  for (let i = 0; i < 2; i++) {
    const eip3009 = await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: USD });
    out.push({ x402Version: 2, accepted: offer('eip3009'), payload: eip3009 });
    const permit2 = await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: USD });
    out.push({ x402Version: 2, accepted: offer('permit2'), payload: permit2 });
  }
  return out;
}
