/**
 * A dev chain, a relayer, a payTo and a funded payer that approved Permit2 for USDT, the local
 * facilitator on that relayer, and the stock upto client to sign with (no Tollgate code): the setup of
 * the upto tests. `rpcUrl` puts something between the facilitator and anvil (a geth-like proxy);
 * `confirmationTimeoutMs` shortens the receipt wait to reach `settlement_pending`.
 */
import { x402Client } from '@x402/fetch';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { localFacilitator } from '../../../src/payments/facilitator/local-facilitator.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { devChain, USD } from '../../support/topup-harness.ts';
import { jsonRpcProxy } from '../../support/rpc-proxy.ts';

export async function uptoSetup(opts: { confirmationTimeoutMs?: number; rpcUrl?: (anvilUrl: string) => Promise<string> } = {}) {
  const { anvil, chain } = await devChain();
  const [relayer, payTo, payer] = [await chain.newAccount(), await chain.newAccount(), await chain.newAccount({ usdt: 10n * USD })];
  await chain.approvePermit2(payer, chain.usdt);
  const facilitator = localFacilitator({
    relayerKey: relayer.privateKey,
    rpcUrls: { [chain.network]: opts.rpcUrl ? await opts.rpcUrl(anvil.rpcUrl) : anvil.rpcUrl },
    allowedFactories: [],
    confirmationTimeoutMs: opts.confirmationTimeoutMs ?? 10_000,
  });
  const requirements = (max: bigint, over: Partial<PaymentRequirements> = {}, facilitatorAddress: string = relayer.address): PaymentRequirements => ({
    scheme: 'upto',
    network: chain.network as PaymentRequirements['network'],
    asset: chain.usdt,
    amount: max.toString(),
    payTo: payTo.address,
    maxTimeoutSeconds: 60,
    extra: { facilitatorAddress, name: 'Tether USD', version: '1' },
    ...over,
  });
  // Since 2.27 the client refuses tokens it does not know unless told (as topup-harness.ts does).
  const sign = async (account: FundedAccount, accepted: PaymentRequirements): Promise<PaymentPayload> => {
    const client = new x402Client().register('eip155:*', new UptoEvmScheme(account));
    client.setSpendControls({ allowedAssets: [{ network: chain.network, asset: chain.usdt, maxAmountPerPayment: '10000000000' }] });
    return client.createPaymentPayload({
      x402Version: 2,
      resource: { url: 'http://resource.test/', description: 'metered', mimeType: 'application/json' },
      accepts: [accepted],
    });
  };
  const balance = (who: string) => chain.balanceOf(chain.usdt, who as `0x${string}`);
  const nonces = async (who: string) => ({
    latest: Number(await anvil.rpc<string>('eth_getTransactionCount', [who, 'latest'])),
    pending: Number(await anvil.rpc<string>('eth_getTransactionCount', [who, 'pending'])),
  });
  return { anvil, chain, relayer, payTo, payer, facilitator, requirements, sign, balance, nonces };
}

/**
 * anvil answering as geth and op-geth (Base) do. They estimate gas against the latest block when no
 * block is named, as viem sends it, and most hosted RPCs do not offer eth_fillTransaction. anvil
 * fills against the pending state, which hides a second send of an authorization still in the pool.
 */
export function gethLikeRpc(anvilUrl: string) {
  return jsonRpcProxy(anvilUrl, (call, _body, res, upstream) => {
    // Like most hosted RPCs: no eth_fillTransaction, so viem estimates gas itself.
    if (call.method === 'eth_fillTransaction') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32601, message: 'the method eth_fillTransaction does not exist/is not available' } }),
      );
      return true;
    }
    if (call.method !== 'eth_estimateGas' || (call.params?.length ?? 0) > 1) return false;
    upstream.forward(Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...call, params: [call.params?.[0], 'latest'] })));
    return true;
  });
}
