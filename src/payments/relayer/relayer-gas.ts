import { Gauge, type Registry } from 'prom-client';
import { formatEther, type Hex, type PublicClient } from 'viem';

/**
 * The relayer pays the gas of every settlement. Out of gas money, every payment is answered 503
 * (nothing is lost, but nobody can pay): operators watch this gauge, read from the chain when
 * scraped, and refill the relayer before it runs dry.
 */
export function watchRelayerGas(
  registry: Registry,
  relayer: string,
  networks: string[],
  clientFor: (network: string) => PublicClient | undefined,
  logger: { warn(obj: object, msg: string): void },
): void {
  const balance = async (network: string) => clientFor(network)?.getBalance({ address: relayer as Hex });
  new Gauge({
    name: 'tollgate_relayer_native_balance',
    help: "The relayer's balance of the chain's native token (ETH on Base), which pays the settlements' gas",
    labelNames: ['network'],
    registers: [registry],
    async collect() {
      for (const network of networks) {
        const wei = await balance(network).catch(() => undefined); // an RPC outage has its own health check
        if (wei !== undefined) this.set({ network }, Number(formatEther(wei)));
      }
    },
  });
  // At start-up, once: a relayer with nothing cannot settle a single payment.
  for (const network of networks) {
    balance(network)
      .then((wei) => {
        if (wei === 0n)
          logger.warn(
            { relayer, network },
            'the relayer has no native balance to pay gas: every payment on this network will be answered 503 until it is funded',
          );
      })
      .catch(() => undefined);
  }
}
