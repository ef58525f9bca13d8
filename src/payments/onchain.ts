import { PERMIT2_ADDRESS, x402ExactPermit2ProxyABI, x402ExactPermit2ProxyAddress, x402UptoPermit2ProxyABI, x402UptoPermit2ProxyAddress } from '@x402/evm';
import { decodeEventLog, decodeFunctionData, erc20Abi, parseAbi, toEventSelector, type Hex, type Log, type PublicClient } from 'viem';
import type { PaymentTable } from '../storage/schema.ts';

/**
 * What the chain says about a recorded payment. This is the only source of truth for crediting:
 * a payment is credited with what its authorization's successful transaction moved from the payer
 * to payTo (its Transfer log), and a transaction pays for one payment only.
 */
export type ChainOutcome =
  /** `amountAtomic`: token units that reached payTo from the payer for this authorization. */
  | { state: 'settled'; txHash: Hex; amountAtomic: bigint }
  /** Not used yet and still valid: our settlement may still be sent or mined. */
  | { state: 'open' }
  /** Our transaction was sent but has no receipt yet. */
  | { state: 'in-flight' }
  /**
   * Our transaction was sent, but the node no longer knows it (dropped from its mempool: evicted,
   * a node restart) and the authorization is still unused: nothing will settle it unless it is sent again.
   */
  | { state: 'dropped' }
  /**
   * The authorization is used, but no transfer to payTo was found yet, and it was used too recently
   * for that to be final: the logs of a node may lag its state. Not a rejection: the payment may yet arrive.
   */
  | { state: 'used-unconfirmed' }
  /** Can never pay us: expired unused, cancelled, or used without a transfer to payTo. */
  | { state: 'void'; reason: string };

const eip3009Abi = parseAbi([
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)',
]);
const permit2Abi = parseAbi(['function nonceBitmap(address owner, uint256 word) view returns (uint256)']);
const transferEvent = erc20Abi.find((x) => x.type === 'event' && x.name === 'Transfer')!;
const tokenEvents = [eip3009Abi[1], transferEvent] as const;

/** Blocks an authorization must have been used for before "no transfer to payTo" is taken as final. */
export const VOID_CONFIRMATIONS = 5;

export type PaymentFacts = Pick<
  PaymentTable,
  'transfer_method' | 'asset' | 'payer' | 'pay_to' | 'nonce' | 'amount_atomic' | 'valid_before' | 'from_block' | 'tx_hash'
>;

export interface InspectOptions {
  nowSeconds: number;
  /** True when another payment row already owns this transaction. */
  isClaimed(txHash: string): Promise<boolean>;
}

export async function inspectOnChain(client: PublicClient, p: PaymentFacts, opts: InspectOptions): Promise<ChainOutcome> {
  let pendingTx = false;
  if (p.tx_hash) {
    const paid = await amountPaidBy(client, p.tx_hash as Hex, p).catch((err: unknown) => {
      if (isReceiptMissing(err)) return undefined;
      throw err;
    });
    if (paid !== undefined && paid !== null) return { state: 'settled', txHash: p.tx_hash as Hex, amountAtomic: paid };
    pendingTx = paid === undefined;
  }

  // Not viem's cached block number (up to a polling interval old): state read at a stale block
  // would call a just-used authorization unused.
  const head = await client.getBlockNumber({ cacheTime: 0 });
  const used = await nonceUsed(client, p, head);
  if (!used) {
    if (pendingTx) return (await nodeKnows(client, p.tx_hash as Hex)) ? { state: 'in-flight' } : { state: 'dropped' };
    // A small margin: a transaction mined right at the deadline is seen by the next pass.
    if (opts.nowSeconds > p.valid_before + 60) return { state: 'void', reason: 'authorization expired without being used' };
    return { state: 'open' };
  }
  // Logs up to the block whose state said "used": the search covers the block that used it.
  const found = p.transfer_method === 'eip3009' ? await eip3009Transaction(client, p, head) : await permit2Transaction(client, p, head, opts);
  if (found) return { state: 'settled', ...found };
  // Final only once it was already used VOID_CONFIRMATIONS blocks ago and the logs to now still show no transfer.
  const deep = head - BigInt(VOID_CONFIRMATIONS);
  if (deep < 0n || !(await nonceUsed(client, p, deep))) return { state: 'used-unconfirmed' };
  return { state: 'void', reason: 'authorization was used or cancelled without a transfer to payTo' };
}

/** False when the node has neither mined nor pooled the transaction. */
async function nodeKnows(client: PublicClient, hash: Hex): Promise<boolean> {
  try {
    await client.getTransaction({ hash });
    return true;
  } catch (err) {
    if ((err as { name?: string }).name === 'TransactionNotFoundError') return false;
    throw err;
  }
}

export const isReceiptMissing = (err: unknown) => (err as { name?: string }).name === 'TransactionReceiptNotFoundError';

/**
 * Token units that transaction `txHash` moved from the payer to payTo for this payment's
 * authorization, from its receipt's Transfer log; null when it reverted or did not use this
 * authorization to pay payTo. Throws TransactionReceiptNotFoundError while it is not mined.
 * The one reading of the chain that crediting, reconciling and `ledger-check --chain` share.
 */
export async function amountPaidBy(client: PublicClient, txHash: Hex, p: PaymentFacts): Promise<bigint | null> {
  const receipt = await client.getTransactionReceipt({ hash: txHash });
  if (receipt.status !== 'success') return null;
  if (p.transfer_method === 'eip3009') return eip3009Amount(receipt.logs, p);
  const tx = await client.getTransaction({ hash: txHash });
  return permit2Amount(receipt.logs, tx, p);
}

/**
 * FiatToken (USDC) emits AuthorizationUsed(payer, nonce) and then, in the same call, the Transfer it
 * authorizes: the asset's next Transfer log after this authorization's AuthorizationUsed is its
 * transfer, whatever else the transaction did.
 */
function eip3009Amount(logs: readonly Log[], p: PaymentFacts): bigint | null {
  let ours = false;
  for (const log of logs) {
    const event = tokenEvent(log, p);
    if (!event) continue;
    if (event.eventName === 'AuthorizationUsed') {
      ours = same(event.args.authorizer, p.payer) && same(event.args.nonce, p.nonce);
    } else if (ours) {
      return same(event.args.from, p.payer) && same(event.args.to, p.pay_to) ? event.args.value : null;
    }
  }
  return null;
}

/**
 * Permit2 logs nothing per nonce. A direct call to the x402 Permit2 proxy names the permit in its
 * calldata, and then the transfers to payTo in that transaction are its transfer. A transaction that
 * reached Permit2 some other way (a contract calling the proxy) cannot be attributed by calldata: it
 * counts only if it holds a transfer of exactly the recorded amount (and no other payment owns it).
 */
function permit2Amount(logs: readonly Log[], tx: { to: Hex | null; input: Hex }, p: PaymentFacts): bigint | null {
  const toPayTo = logs.flatMap((log) => {
    const e = tokenEvent(log, p);
    return e?.eventName === 'Transfer' && same(e.args.from, p.payer) && same(e.args.to, p.pay_to) ? [e.args.value] : [];
  });
  if (toPayTo.length === 0) return null;
  const proxyCall = tx.to && (same(tx.to, x402ExactPermit2ProxyAddress) || same(tx.to, x402UptoPermit2ProxyAddress)) ? proxySettle(tx.input) : undefined;
  if (proxyCall !== undefined) {
    if (proxyCall === null || proxyCall.nonce !== BigInt(p.nonce) || !same(proxyCall.owner, p.payer)) return null;
    return toPayTo.reduce((a, b) => a + b, 0n);
  }
  // Not a call to the proxy itself: a contract that called the proxy inside its own transaction (a
  // front-runner settling the payer's signature first). It counts only if the proxy settled in it:
  // a plain transfer from the payer to payTo, after the payer cancelled this authorization's nonce,
  // is some other payment and must not be credited as this one.
  if (!logs.some(isProxySettlement)) return null;
  const recorded = BigInt(p.amount_atomic);
  return toPayTo.includes(recorded) ? recorded : null;
}

/**
 * The permit's nonce and owner of a direct call to one of the x402 Permit2 proxies' `settle`: the
 * exact proxy's `settle(permit, owner, witness, signature)`, the upto one's `settle(permit, amount,
 * owner, witness, signature)`. Null when the call is anything else.
 */
function proxySettle(input: Hex): { nonce: bigint; owner: string } | null {
  for (const abi of [x402ExactPermit2ProxyABI, x402UptoPermit2ProxyABI] as const) {
    try {
      const call = decodeFunctionData({ abi, data: input });
      if (call.functionName !== 'settle') continue;
      const args = call.args as readonly unknown[];
      const permit = args[0] as { nonce: bigint };
      const owner = (args.length === 5 ? args[2] : args[1]) as string;
      return { nonce: permit.nonce, owner };
    } catch {
      // Not this proxy's call: try the other.
    }
  }
  return null;
}

const PROXY_SETTLED_TOPICS = new Set(x402ExactPermit2ProxyABI.filter((item) => item.type === 'event').map((event) => toEventSelector(event).toLowerCase()));

/** A log the x402 Permit2 proxy wrote when it settled a permit (`Settled` or `SettledWithPermit`). */
function isProxySettlement(log: Log): boolean {
  const topic = log.topics[0];
  return same(log.address, x402ExactPermit2ProxyAddress) && topic !== undefined && PROXY_SETTLED_TOPICS.has(topic.toLowerCase());
}

function tokenEvent(log: Log, p: PaymentFacts) {
  if (!same(log.address, p.asset)) return null;
  try {
    return decodeEventLog({ abi: tokenEvents, data: log.data, topics: log.topics });
  } catch {
    return null;
  }
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

async function nonceUsed(client: PublicClient, p: PaymentFacts, blockNumber: bigint): Promise<boolean> {
  if (p.transfer_method === 'eip3009') {
    return client.readContract({
      address: p.asset as Hex,
      abi: eip3009Abi,
      functionName: 'authorizationState',
      args: [p.payer as Hex, p.nonce as Hex],
      blockNumber,
    });
  }
  const nonce = BigInt(p.nonce);
  const word = await client.readContract({
    address: PERMIT2_ADDRESS,
    abi: permit2Abi,
    functionName: 'nonceBitmap',
    args: [p.payer as Hex, nonce >> 8n],
    blockNumber,
  });
  return ((word >> (nonce & 0xffn)) & 1n) === 1n;
}

type Found = { txHash: Hex; amountAtomic: bigint } | null;

/** EIP-3009 tokens log which authorization a transaction used; follow it to the transfer. */
async function eip3009Transaction(client: PublicClient, p: PaymentFacts, toBlock: bigint): Promise<Found> {
  const logs = await client.getLogs({
    address: p.asset as Hex,
    event: eip3009Abi[1],
    args: { authorizer: p.payer as Hex, nonce: p.nonce as Hex },
    fromBlock: BigInt(p.from_block),
    toBlock,
  });
  for (const log of logs) {
    if (!log.transactionHash) continue;
    const amountAtomic = await amountPaidBy(client, log.transactionHash, p);
    if (amountAtomic !== null) return { txHash: log.transactionHash, amountAtomic };
  }
  return null;
}

/**
 * Permit2: look through the transfers from the payer to payTo, preferring the one whose proxy call
 * carries this nonce, and never one another payment owns.
 */
async function permit2Transaction(client: PublicClient, p: PaymentFacts, toBlock: bigint, opts: InspectOptions): Promise<Found> {
  const logs = await client.getLogs({
    address: p.asset as Hex,
    event: transferEvent,
    args: { from: p.payer as Hex, to: p.pay_to as Hex },
    fromBlock: BigInt(p.from_block),
    toBlock,
  });
  let fallback: Found = null;
  for (const hash of new Set(logs.map((l) => l.transactionHash).filter((h): h is Hex => !!h))) {
    if (await opts.isClaimed(hash)) continue;
    const amountAtomic = await amountPaidBy(client, hash, p);
    if (amountAtomic === null) continue;
    const tx = await client.getTransaction({ hash });
    if (tx.to && (same(tx.to, x402ExactPermit2ProxyAddress) || same(tx.to, x402UptoPermit2ProxyAddress))) return { txHash: hash, amountAtomic };
    fallback ??= { txHash: hash, amountAtomic };
  }
  return fallback;
}
