import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { parseGwei, type Hex, type PublicClient } from 'viem';
import type { ChainReaders } from '../chain/readers.ts';
import type { Config } from '../config/schema.ts';
import type { Database } from '../storage/schema.ts';
import type { Facilitator } from './facilitator/facilitator.ts';
import { localFacilitator } from './facilitator/local-facilitator.ts';
import { chainIdOf, type MatchedPayment } from './match.ts';
import { admitPayer } from './payer-identity.ts';
import { reconcilePayments, type ReconcileReport } from './reconciler.ts';
import { remoteFacilitator } from './facilitator/remote-facilitator.ts';
import { relayerLockFor } from './relayer/relayer-lock.ts';
import type { CrossInstanceLock } from './relayer/relayer-queue.ts';
import type { Engine } from '../storage/database.ts';
import { reconcileUpto, type UptoReconcileMetrics } from './upto/reconcile-upto.ts';
import type { UptoSettleDeps } from './upto/settle-upto.ts';

/** Top-ups as the running gateway holds them: the facilitator, chain access, and the reconciler's pass. */
export interface TopupService {
  facilitator: Facilitator;
  /** The relayer's address when this gateway settles with its own key (local facilitator). */
  relayer?: string;
  clientFor(network: string): PublicClient | undefined;
  /** Refuses (throws) a contract-wallet payer outside the contract-wallet chain, before anything is recorded. */
  admitPayer(m: MatchedPayment): Promise<void>;
  /** One reconciler pass; the gateway's background jobs run it at start-up and every `reconcileEveryMs`. */
  reconcile(): Promise<ReconcileReport>;
  reconcileEveryMs: number;
  /** TEST ONLY fail point between record and broadcast (src/fail-points.ts); undefined normally. */
  beforeBroadcast?: () => Promise<void>;
  /** What settling an x402 upto payment after its request needs (src/payments/upto/). */
  upto: Omit<UptoSettleDeps, 'logger'>;
  /** The address an upto witness must bind on `network` (the relayer, or a remote facilitator's); undefined: no upto there. */
  uptoFacilitatorFor(network: string): string | undefined;
}

/** `sendLock`: see relayer-lock.ts; without it only this process's sends are serialized. */
export function createFacilitator(config: Config, sendLock?: CrossInstanceLock): Facilitator {
  const f = config.topup.facilitator;
  if (f.type === 'remote') return remoteFacilitator(f.url, f.timeoutSeconds * 1000, config.secrets.facilitatorToken);
  const rpcUrls: Record<string, string> = {};
  for (const o of config.topup.offers) rpcUrls[o.network] = config.chains[String(chainIdOf(o.network))]!.rpcUrl;
  return localFacilitator({
    relayerKey: config.secrets.relayerKey as Hex,
    // With channels offered, the in-process facilitator signs their claims and refunds with the
    // relayer's key: the gateway asks it only for its own channels' refunds (channel-refund.ts).
    receiverAuthorizerKey: config.payPerRequest.batchSettlement.enabled ? (config.secrets.relayerKey as Hex) : undefined,
    rpcUrls,
    allowedFactories: f.allowedFactories,
    confirmationTimeoutMs: config.topup.settleWaitSeconds * 1000,
    sendLock,
    queue: { waitMs: config.topup.relayer.sendWaitSeconds * 1000, maxQueued: config.topup.relayer.maxQueuedSends },
    bumps: { maxBumps: config.topup.relayer.maxFeeBumps, maxFeePerGas: parseGwei(String(config.topup.relayer.maxFeePerGasGwei)) },
  });
}

/** Null when no offers are configured: top-ups are then off and /v1/topup says so. */
export function createTopupService(
  config: Config,
  deps: {
    db: Kysely<Database>;
    engine: Engine;
    chains: ChainReaders;
    logger: Logger;
    now: () => number;
    hangBeforeBroadcast?: boolean;
    countUptoUnsettled?: () => void;
    uptoMetrics?: UptoReconcileMetrics;
  },
): TopupService | null {
  if (config.topup.offers.length === 0) return null;
  const facilitator = createFacilitator(config, relayerLockFor(deps.engine, deps.db, config.topup.relayer.sendWaitSeconds * 1000));
  const clientFor = (network: string) => {
    const id = chainIdOf(network);
    return deps.chains.has(id) ? deps.chains.client(id) : undefined;
  };
  const releaseAfterMs = config.topup.settleWaitSeconds * 1000;
  const replaceStuck = facilitator.replaceStuck?.bind(facilitator);
  const upto = { db: deps.db, facilitator, clientFor, countUnsettled: deps.countUptoUnsettled ?? (() => {}) };
  const uptoFacilitators = config.payPerRequest.upto ? uptoFacilitatorAddresses(facilitator, deps.logger) : () => undefined;
  const reconcile = async () => {
    const report = await reconcilePayments({ db: deps.db, clientFor, logger: deps.logger, now: deps.now, releaseAfterMs, replaceStuck });
    await reconcileUpto({ ...upto, logger: deps.logger, now: deps.now, staleMs: releaseAfterMs, metrics: deps.uptoMetrics });
    return report;
  };
  return {
    upto,
    uptoFacilitatorFor: uptoFacilitators,
    facilitator,
    relayer: (facilitator as Facilitator & { relayer?: string }).relayer,
    clientFor,
    admitPayer: (m) => admitPayer(m, config.siwe.contractWalletChainId, clientFor(m.identity.network)!),
    reconcile,
    beforeBroadcast: deps.hangBeforeBroadcast ? hangForever(deps.logger) : undefined,
    reconcileEveryMs: config.topup.reconcileIntervalSeconds * 1000,
  };
}

/**
 * The address an upto witness binds, per network: the local facilitator's relayer; for a remote
 * facilitator, `extra.facilitatorAddress` of its /supported `upto` kinds, read once at start-up in
 * the background (until it answers, no upto is offered).
 */
function uptoFacilitatorAddresses(facilitator: Facilitator, logger: Logger): (network: string) => string | undefined {
  const relayer = (facilitator as Facilitator & { relayer?: string }).relayer;
  if (relayer) return () => relayer;
  const known = new Map<string, string>();
  facilitator
    .supported()
    .then(({ kinds }) => {
      for (const k of kinds as Array<{ scheme: string; network: string; extra?: { facilitatorAddress?: unknown } }>) {
        if (k.scheme === 'upto' && typeof k.extra?.facilitatorAddress === 'string') known.set(k.network, k.extra.facilitatorAddress);
      }
    })
    .catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'the remote facilitator did not list its upto kinds; upto is not offered'));
  return (network) => known.get(network);
}

function hangForever(logger: Logger): () => Promise<void> {
  logger.warn('TEST HOOK TOLLGATE_TEST_HANG_BEFORE_BROADCAST is on: every top-up stops before it is sent');
  return () => {
    logger.warn('test fail point reached: payment recorded, not sent');
    return new Promise<void>(() => {});
  };
}
