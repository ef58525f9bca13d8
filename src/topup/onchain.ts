import { PERMIT2_ADDRESS, x402ExactPermit2ProxyABI } from '@x402/evm';
import { decodeEventLog, decodeFunctionData, erc20Abi, parseAbi, type Hex, type Log, type PublicClient } from 'viem';
import type { PaymentTable } from '../storage/schema.ts';

/**
 * What the chain says about a recorded payment. This is the only source of truth for crediting:
 * a payment is credited when a successful transaction moved exactly its amount of its token from
 * the payer to payTo, and for that transaction only once.
 */
export type ChainOutcome =
  | { state: 'settled'; txHash: Hex }
  /** Not used yet and still valid: our settlement may still be sent or mined. */
  | { state: 'open' }
  /** Our transaction was sent but has no receipt yet. */
  | { state: 'in-flight' }
  /** Can never pay us: expired unused, cancelled, or used without a transfer to payTo. */
  | { state: 'void'; reason: string };

const eip3009Abi = parseAbi([
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
]);
const permit2Abi = parseAbi(['function nonceBitmap(address owner, uint256 word) view returns (uint256)']);

type PaymentFacts = Pick<PaymentTable, 'transfer_method' | 'asset' | 'payer' | 'pay_to' | 'nonce' | 'amount_atomic' | 'valid_before' | 'from_block' | 'tx_hash'>;

export interface InspectOptions {
  nowSeconds: number;
  /** True when another payment row already owns this transaction. */
  isClaimed(txHash: string): Promise<boolean>;
}

export async function inspectOnChain(client: PublicClient, p: PaymentFacts, opts: InspectOptions): Promise<ChainOutcome> {
  let pendingTx = false;
  if (p.tx_hash) {
    const receipt = await client.getTransactionReceipt({ hash: p.tx_hash as Hex }).catch((err: unknown) => {
      if ((err as { name?: string }).name === 'TransactionReceiptNotFoundError') return null;
      throw err;
    });
    if (receipt?.status === 'success' && paysUs(receipt.logs, p)) return { state: 'settled', txHash: p.tx_hash as Hex };
    pendingTx = receipt === null;
  }

  const used = await nonceUsed(client, p);
  if (!used) {
    if (pendingTx) return { state: 'in-flight' };
    // A small margin: a transaction mined right at the deadline is seen by the next pass.
    if (opts.nowSeconds > p.valid_before + 60) return { state: 'void', reason: 'authorization expired without being used' };
    return { state: 'open' };
  }
  const txHash = p.transfer_method === 'eip3009' ? await eip3009Transaction(client, p) : await permit2Transaction(client, p, opts);
  if (txHash) return { state: 'settled', txHash };
  return { state: 'void', reason: 'authorization was used or cancelled without a transfer to payTo' };
}

async function nonceUsed(client: PublicClient, p: PaymentFacts): Promise<boolean> {
  if (p.transfer_method === 'eip3009') {
    return client.readContract({ address: p.asset as Hex, abi: eip3009Abi, functionName: 'authorizationState', args: [p.payer as Hex, p.nonce as Hex] });
  }
  const nonce = BigInt(p.nonce);
  const word = await client.readContract({ address: PERMIT2_ADDRESS, abi: permit2Abi, functionName: 'nonceBitmap', args: [p.payer as Hex, nonce >> 8n] });
  return ((word >> (nonce & 0xffn)) & 1n) === 1n;
}

/** EIP-3009 tokens log which authorization a transaction used; follow it to the transfer. */
async function eip3009Transaction(client: PublicClient, p: PaymentFacts): Promise<Hex | null> {
  const logs = await client.getLogs({
    address: p.asset as Hex,
    event: eip3009Abi[1],
    args: { authorizer: p.payer as Hex, nonce: p.nonce as Hex },
    fromBlock: BigInt(p.from_block),
  });
  for (const log of logs) {
    if (!log.transactionHash) continue;
    const receipt = await client.getTransactionReceipt({ hash: log.transactionHash });
    if (receipt.status === 'success' && paysUs(receipt.logs, p)) return log.transactionHash;
  }
  return null;
}

/**
 * Permit2 logs nothing per nonce, so look for transfers of this amount from the payer to payTo,
 * preferring the one whose proxy call carries this nonce, and never one another payment owns.
 */
async function permit2Transaction(client: PublicClient, p: PaymentFacts, opts: InspectOptions): Promise<Hex | null> {
  const transferEvent = erc20Abi.find((x) => x.type === 'event' && x.name === 'Transfer')!;
  const logs = await client.getLogs({
    address: p.asset as Hex,
    event: transferEvent,
    args: { from: p.payer as Hex, to: p.pay_to as Hex },
    fromBlock: BigInt(p.from_block),
  });
  let fallback: Hex | null = null;
  for (const log of logs) {
    if (!log.transactionHash || log.args.value !== BigInt(p.amount_atomic)) continue;
    if (await opts.isClaimed(log.transactionHash)) continue;
    const tx = await client.getTransaction({ hash: log.transactionHash });
    try {
      const call = decodeFunctionData({ abi: x402ExactPermit2ProxyABI, data: tx.input });
      if (call.functionName === 'settle' && call.args[0].nonce === BigInt(p.nonce)) return log.transactionHash;
    } catch {
      // Sent through some other contract: the transfer still arrived.
    }
    fallback ??= log.transactionHash;
  }
  return fallback;
}

/** The transaction moved exactly this payment's amount of its token from the payer to payTo. */
export function paysUs(logs: readonly Log[], p: Pick<PaymentFacts, 'asset' | 'payer' | 'pay_to' | 'amount_atomic'>): boolean {
  return logs.some((log) => {
    if (log.address.toLowerCase() !== p.asset.toLowerCase()) return false;
    try {
      const event = decodeEventLog({ abi: erc20Abi, data: log.data, topics: log.topics });
      return (
        event.eventName === 'Transfer' &&
        event.args.from.toLowerCase() === p.payer.toLowerCase() &&
        event.args.to.toLowerCase() === p.pay_to.toLowerCase() &&
        event.args.value === BigInt(p.amount_atomic)
      );
    } catch {
      return false;
    }
  });
}
