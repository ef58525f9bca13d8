import { AsyncLocalStorage } from 'node:async_hooks';
import { x402Facilitator } from '@x402/core/facilitator';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { concatHex, createWalletClient, encodeFunctionData, http, publicActions, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { evmChain } from '../../chain/evm-chain.ts';
import { isTransportError } from '../../chain/rpc-errors.ts';
import { relayerRefusal, RelayerCouldNotSend } from '../relayer/broadcast-refusal.ts';
import { signAndSend, type RelayerTx } from '../relayer/relayer-send.ts';
import { registerExactScheme } from '../relayer/exact-scheme.ts';
import { registerUptoScheme } from '../relayer/upto-scheme.ts';
import { registerBatchSettlementScheme } from '../relayer/batch-settlement-scheme.ts';
import { replaceWithHigherFee } from '../relayer/fee-bump.ts';
import { FacilitatorUnavailable, type Facilitator } from './facilitator.ts';
import { chainIdOf } from '../match.ts';
import { sendKey, serializedSend, type CrossInstanceLock, type QueueBounds } from '../relayer/relayer-queue.ts';

export interface LocalFacilitatorOptions {
  relayerKey: Hex;
  /**
   * The batch-settlement `receiverAuthorizer`: signs the ClaimBatch and Refund authorizations of the
   * gateway's channels, and is advertised in /supported. The gateway passes its key (by default the
   * relayer's) when it offers batch-settlement. Without it nothing is signed or advertised: the spec
   * forbids advertising a receiverAuthorizer without authenticating who asks for refunds, and
   * `tollgate facilitator` may run with no token (docs/DECISIONS.md, "batch-settlement: the stand-in
   * contract and the receiverAuthorizer").
   */
  receiverAuthorizerKey?: Hex;
  /** CAIP-2 network → RPC URL. */
  rpcUrls: Record<string, string>;
  allowedFactories: string[];
  /** How long settle waits for the receipt before the outcome counts as unknown. */
  confirmationTimeoutMs: number;
  rpcTimeoutMs?: number;
  /** Gateways sharing the relayer key on one database: one send at a time across them (relayer-lock.ts). */
  sendLock?: CrossInstanceLock;
  /** How long and how many sends may wait for their turn (relayer-queue.ts). */
  queue?: QueueBounds;
  /** Bounds on fee bumps of a stuck settlement (fee-bump.ts). */
  bumps?: { maxBumps: number; maxFeePerGas: bigint };
}

const DEFAULT_BUMPS = { maxBumps: 5, maxFeePerGas: 200n * 10n ** 9n };

/**
 * Per-call state the signer reports into: whether the RPC failed, whether a node refused the
 * relayer's transaction (and why), and where to send the tx hash.
 */
interface CallContext {
  rpcFailed: boolean;
  refusal?: string;
  onBroadcast?: (txHash: string) => Promise<void>;
}

const RECEIPT_POLL_MS = 500;

/**
 * The built-in facilitator: @x402/core's x402Facilitator with @x402/evm's exact scheme (EIP-3009
 * and Permit2), its upto scheme (Permit2, the amount chosen at settle time) and its batch-settlement
 * scheme (channel deposits, claims, settles, refunds), one relayer key, one RPC per network. The
 * relayer pays the gas of settlement.
 */
export function localFacilitator(opts: LocalFacilitatorOptions): Facilitator & { relayer: string; receiverAuthorizer?: string } {
  const account = privateKeyToAccount(opts.relayerKey);
  const receiverAuthorizer = opts.receiverAuthorizerKey ? privateKeyToAccount(opts.receiverAuthorizerKey) : undefined;
  const calls = new AsyncLocalStorage<CallContext>();
  const facilitator = new x402Facilitator();
  const replacers = new Map<string, (hash: Hex) => Promise<Hex | null>>();

  for (const [network, rpcUrl] of Object.entries(opts.rpcUrls)) {
    const chain = evmChain(chainIdOf(network), rpcUrl);
    const key = sendKey(account.address, chain.id);
    // The receipt wait polls every pollingInterval; viem's default for a chain without a block time is
    // 4 s, which a payer waits in full whenever the first look finds no receipt yet (measured: the
    // last of 20 concurrent top-ups waited 4.3 s on anvil instead of 0.7 s).
    const client = createWalletClient({
      account,
      chain,
      pollingInterval: RECEIPT_POLL_MS,
      transport: http(rpcUrl, { timeout: opts.rpcTimeoutMs ?? 10_000, retryCount: 0 }),
    }).extend(publicActions);
    const markRpcFailed = () => {
      const ctx = calls.getStore();
      if (ctx) ctx.rpcFailed = true;
    };
    const reporting =
      <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        try {
          return await fn(...args);
        } catch (err) {
          if (isTransportError(err)) markRpcFailed();
          throw err;
        }
      };
    // Nonce, signature and broadcast under one lock (relayer-queue.ts); the receipt waits run outside it.
    // The nonce is read here, under the lock, rather than left to viem (which asks the node to fill
    // it in, with no lock around it): the chain's pending count, so a gap heals by itself.
    // `record`: the settlement's hash goes to the payment before it is broadcast (relayer-send.ts).
    const send = (tx: RelayerTx, record?: (hash: Hex) => Promise<void>): Promise<Hex> =>
      serializedSend(
        key,
        async () => signAndSend(client, account, tx, await client.getTransactionCount({ address: account.address, blockTag: 'pending' }), record),
        opts.sendLock,
        opts.queue,
      ).catch((err: unknown) => {
        const refusal = err instanceof RelayerCouldNotSend ? err.message : relayerRefusal(err);
        const ctx = calls.getStore();
        if (refusal && ctx) ctx.refusal = refusal;
        throw err;
      });
    const signer = toFacilitatorEvmSigner(
      {
        address: account.address,
        readContract: reporting((args) => client.readContract(args as Parameters<typeof client.readContract>[0])),
        verifyTypedData: reporting((args) => client.verifyTypedData(args as Parameters<typeof client.verifyTypedData>[0])),
        // Only the ERC-6492 wallet deployment: not the settlement, so its hash is not the payment's.
        sendTransaction: reporting((args) => send({ to: args.to, data: args.data ?? '0x' })),
        waitForTransactionReceipt: reporting((args) => client.waitForTransactionReceipt(args)),
        writeContract: reporting(async (args) => {
          const call = args as { address: Hex; abi: readonly unknown[]; functionName: string; args: readonly unknown[]; dataSuffix?: Hex };
          const data = encodeFunctionData({ abi: call.abi, functionName: call.functionName, args: call.args } as Parameters<typeof encodeFunctionData>[0]);
          return send({ to: call.address, data: call.dataSuffix ? concatHex([data, call.dataSuffix]) : data }, calls.getStore()?.onBroadcast);
        }),
        // The exact scheme starts this check in the background and may return before awaiting it;
        // a rejection there would be unhandled and can take the process down. Report and resolve.
        getCode: (args) =>
          client.getCode(args).catch(() => {
            markRpcFailed();
            return undefined;
          }),
      },
      { confirmationTimeoutMs: opts.confirmationTimeoutMs },
    );
    registerExactScheme(facilitator, signer, network, opts.allowedFactories);
    registerUptoScheme(facilitator, signer, network, (hash) => client.getTransaction({ hash }));
    registerBatchSettlementScheme(facilitator, signer, network, receiverAuthorizer, opts.allowedFactories);
    // Replacements so far per nonce, in this process: the bump cap (fee-bump.ts). A restart starts
    // the count again, which the fee ceiling still bounds.
    const bumped = new Map<number, number>();
    replacers.set(network, async (hash) => {
      const tx = await client.getTransaction({ hash }).catch(() => null);
      const bumpsSoFar = tx ? (bumped.get(tx.nonce) ?? 0) : 0;
      const replacement = await replaceWithHigherFee(client, account.address, hash, { ...(opts.bumps ?? DEFAULT_BUMPS), bumpsSoFar }, (r) =>
        serializedSend(key, () => client.sendTransaction(r), opts.sendLock, opts.queue),
      );
      if (replacement && tx) bumped.set(tx.nonce, bumpsSoFar + 1);
      return replacement;
    });
  }

  const withContext = async <R>(onBroadcast: CallContext['onBroadcast'], fn: () => Promise<R>): Promise<{ result: R } & CallContext> => {
    const ctx: CallContext = { rpcFailed: false, onBroadcast };
    const result = await calls.run(ctx, fn);
    return { ...ctx, result };
  };

  return {
    kind: 'local',
    relayer: account.address,
    receiverAuthorizer: receiverAuthorizer?.address,
    async verify(payload, requirements) {
      try {
        const { result, rpcFailed } = await withContext(undefined, () => facilitator.verify(payload, requirements));
        // With the RPC down the scheme can report a bad signature or a missing contract instead.
        if (!result.isValid && rpcFailed) throw new FacilitatorUnavailable(`the RPC for ${requirements.network} did not answer`);
        return result;
      } catch (err) {
        if (err instanceof FacilitatorUnavailable || isTransportError(err))
          throw new FacilitatorUnavailable(`the RPC for ${requirements.network} did not answer`);
        throw err;
      }
    },
    async settle(payload, requirements, onBroadcast) {
      const { result, rpcFailed, refusal } = await withContext(onBroadcast, () => facilitator.settle(payload, requirements));
      // The exact scheme reports a refused send as a failed settlement; it is the relayer's failure, not the payer's.
      if (!result.success && refusal) throw new RelayerCouldNotSend(`the relayer could not send the settlement on ${requirements.network} (${refusal})`);
      if (!result.success && rpcFailed) throw new FacilitatorUnavailable(`the RPC for ${requirements.network} did not answer`);
      return result;
    },
    async supported() {
      return facilitator.getSupported();
    },
    replaceStuck(network, txHash) {
      return replacers.get(network)?.(txHash as Hex) ?? Promise.resolve(null);
    },
  };
}
