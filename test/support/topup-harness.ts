import { after } from 'node:test';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import type { PaymentRequirements } from '@x402/core/types';
import { startAnvil, type Anvil } from '../../src/devchain/anvil.ts';
import { deployDevChain, USDC_DOMAIN, USDT_DOMAIN, type DevChain, type FundedAccount } from '../../src/devchain/deploy.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import type { Engine } from '../../src/storage/database.ts';
import { call, mergeConfig, startTestGateway, type TestGateway } from './gateway.ts';
import { signEip3009, v2Header } from './x402-payloads.ts';

/**
 * A real chain (anvil with Circle's USDC, Uniswap's Permit2, a Tether-like USDT and the stand-in
 * x402 Permit2 proxy) shared by one test file, and gateways that accept payments on it.
 */
let shared: Promise<{ anvil: Anvil; chain: DevChain }> | undefined;
after(async () => {
  if (shared) await (await shared).anvil.stop();
});

export function devChain(): Promise<{ anvil: Anvil; chain: DevChain }> {
  shared ??= (async () => {
    const anvil = await startAnvil();
    return { anvil, chain: await deployDevChain(anvil) };
  })();
  return shared;
}

/** 1 USD in the tokens' smallest unit (both have 6 decimals). */
export const USD = 1_000_000n;

export interface TopupHarness {
  anvil: Anvil;
  chain: DevChain;
  gw: TestGateway;
  payTo: FundedAccount;
  relayer: FundedAccount;
  /** The gateway's config for `topup` and `chains`, to start a second gateway on the same chain. */
  gatewayConfig: Record<string, unknown>;
  env: NodeJS.ProcessEnv;
  /** A payer holding `usd` of each token. */
  payer(usd?: bigint): Promise<FundedAccount>;
  /** `n` payers, funded one after another (funding is itself a run of transactions from one key). */
  payers(n: number, usd?: bigint): Promise<FundedAccount[]>;
  /** The stock @x402/fetch client for `account`, preferring one transfer method. */
  payingFetch(account: FundedAccount, method?: 'eip3009' | 'permit2'): typeof fetch;
  topup(account: FundedAccount, usd: number, method?: 'eip3009' | 'permit2'): Promise<Response>;
  /** Micro-USDC balance in the gateway's ledger. */
  balance(address: string): Promise<number>;
  post(body: unknown, headers?: Record<string, string>): ReturnType<typeof call>;
  stop(): Promise<void>;
}

export interface TopupHarnessOptions {
  config?: Record<string, unknown>;
  databaseUrl?: string;
  /** Facilitator section override (e.g. remote). */
  facilitator?: Record<string, unknown>;
  /** Extra environment for the gateway. */
  env?: NodeJS.ProcessEnv;
  /** The recipient, when it must be shared with another process. */
  payTo?: FundedAccount;
}

export async function startTopupHarness(engine: Engine, opts: TopupHarnessOptions = {}): Promise<TopupHarness> {
  const { anvil, chain } = await devChain();
  const [payTo, relayer] = [opts.payTo ?? (await chain.newAccount()), await chain.newAccount()];
  const env = { TOLLGATE_RELAYER_KEY: relayer.privateKey, ...opts.env };
  const gatewayConfig = {
    chains: { [String(anvil.chainId)]: { rpcUrl: anvil.rpcUrl } },
    topup: {
      payTo: payTo.address,
      settleWaitSeconds: 5,
      offers: [
        { network: chain.network, asset: chain.usdc, transferMethod: 'eip3009', ...USDC_DOMAIN, decimals: 6 },
        { network: chain.network, asset: chain.usdt, transferMethod: 'permit2', ...USDT_DOMAIN, decimals: 6 },
      ],
      facilitator: opts.facilitator ?? { type: 'local' },
    },
    rateLimits: { public: { perMinute: 100_000 }, keys: { perMinute: 100_000 } },
  };
  const gw = await startTestGateway({ engine, env, databaseUrl: opts.databaseUrl, config: mergeConfig(gatewayConfig, opts.config ?? {}) });

  const payingFetch = (account: FundedAccount, method: 'eip3009' | 'permit2' = 'eip3009') => {
    const prefer = (_version: number, accepts: PaymentRequirements[]) => accepts.find((r) => r.extra?.assetTransferMethod === method) ?? accepts[0]!;
    const client = new x402Client(prefer);
    registerExactEvmScheme(client, { signer: account });
    // Since 2.27 the client refuses more than $1, or tokens it does not know, unless told otherwise.
    client.setSpendControls({
      maxAmountPerPayment: '$10000',
      allowedAssets: [
        { network: chain.network, asset: chain.usdc, maxAmountPerPayment: '10000000000' },
        { network: chain.network, asset: chain.usdt, maxAmountPerPayment: '10000000000' },
      ],
    });
    return wrapFetchWithPayment(fetch, client) as typeof fetch;
  };

  return {
    anvil,
    chain,
    gw,
    payTo,
    relayer,
    gatewayConfig,
    env,
    payer: (usd = 100n) => chain.newAccount({ usdc: usd * USD, usdt: usd * USD }),
    async payers(n, usd = 100n) {
      const funded: FundedAccount[] = [];
      for (let i = 0; i < n; i++) funded.push(await chain.newAccount({ usdc: usd * USD, usdt: usd * USD }));
      return funded;
    },
    payingFetch,
    topup: (account, usd, method) =>
      payingFetch(account, method)(`${gw.url}/v1/topup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ amount: usd }),
      }),
    balance: async (address) => (await getBalance(gw.services.storage.db, address)).balance_usdc,
    post: (body, headers = {}) => call(gw.url, 'POST', '/v1/topup', body, headers),
    stop: () => gw.stop(),
  };
}

/**
 * The 402 offers of a harness for some top-up amounts, fetched once, and a way to pay one of them
 * with a signed payload in the v2 `PAYMENT-SIGNATURE` header: the attack tests send payloads the
 * x402 client would never build.
 */
export async function offerBook(h: TopupHarness, amountsUsd: number[]) {
  const offers: Record<number, PaymentRequirements[]> = {};
  for (const usd of amountsUsd) offers[usd] = (await h.post({ amount: usd })).body.accepts;
  const offer = (usd: number, method: 'eip3009' | 'permit2') => offers[usd]!.find((o) => o.extra?.assetTransferMethod === method)!;
  const pay = (usd: number, method: 'eip3009' | 'permit2', payload: unknown) =>
    h.post({ amount: usd }, { 'payment-signature': v2Header(offer(usd, method), payload) });
  return { offer, pay };
}

/** A USDC authorization (EIP-3009) from `payer` to the harness's `payTo` for `value` micro-USDC, as a stock client signs it. */
export function usdcAuthorization(h: Pick<TopupHarness, 'chain' | 'anvil' | 'payTo'>, payer: FundedAccount, value: bigint) {
  return signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value });
}
