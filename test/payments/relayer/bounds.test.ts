import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Hex } from 'viem';
import { RelayerCouldNotSend } from '../../../src/payments/relayer/broadcast-refusal.ts';
import { replaceWithHigherFee, type BumpLimits, type Replacement } from '../../../src/payments/relayer/fee-bump.ts';
import { serializedSend } from '../../../src/payments/relayer/relayer-queue.ts';

const relayer = '0x1111111111111111111111111111111111111111';
const gwei = 10n ** 9n;

/** The node's copy of a stuck settlement (nonce 5, 2 gwei max fee, 1 gwei tip), the relayer's mined count, and the market. */
function node(opts: { mined: number; market: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint } }) {
  return {
    getTransaction: async () => ({
      blockNumber: null,
      from: relayer,
      to: relayer as Hex,
      input: '0x' as Hex,
      gas: 100_000n,
      nonce: 5,
      maxFeePerGas: 2n * gwei,
      maxPriorityFeePerGas: 1n * gwei,
      gasPrice: undefined,
    }),
    getTransactionCount: async () => opts.mined,
    estimateFeesPerGas: async () => opts.market,
  } as unknown as Parameters<typeof replaceWithHigherFee>[0];
}

describe('attack: fee bumps without bound', () => {
  const limits: BumpLimits = { maxBumps: 3, maxFeePerGas: 50n * gwei, bumpsSoFar: 0 };
  const bump = async (client: ReturnType<typeof node>, l = limits) => {
    const sent: Replacement[] = [];
    const hash = await replaceWithHigherFee(client, relayer, '0xaa', l, async (r) => (sent.push(r), '0xbb'));
    return { hash, sent };
  };
  const underpriced = { maxFeePerGas: 4n * gwei, maxPriorityFeePerGas: 2n * gwei };

  test('an underpriced settlement next in line is re-sent at a higher fee under its nonce', async () => {
    const { hash, sent } = await bump(node({ mined: 5, market: underpriced }));
    assert.equal(hash, '0xbb');
    assert.equal(sent[0]!.nonce, 5);
    assert.ok(sent[0]!.maxFeePerGas >= 4n * gwei && sent[0]!.maxPriorityFeePerGas >= 2n * gwei);
  });

  test('a gapped settlement (nonce above the mined count) is never bumped: a higher fee cannot mine it', async () => {
    assert.deepEqual(await bump(node({ mined: 4, market: underpriced })), { hash: null, sent: [] });
  });

  test('a settlement at the market price is bumped once; one already a bump above the market waits for a block', async () => {
    assert.equal((await bump(node({ mined: 5, market: { maxFeePerGas: 2n * gwei, maxPriorityFeePerGas: 1n * gwei } }))).hash, '0xbb');
    const calm = { maxFeePerGas: (2n * gwei * 8n) / 9n, maxPriorityFeePerGas: (1n * gwei * 8n) / 9n };
    assert.deepEqual(await bump(node({ mined: 5, market: calm })), { hash: null, sent: [] });
  });

  test('no bump above the fee ceiling, and none past the bump cap', async () => {
    assert.deepEqual(await bump(node({ mined: 5, market: { maxFeePerGas: 80n * gwei, maxPriorityFeePerGas: 2n * gwei } })), { hash: null, sent: [] });
    assert.deepEqual(await bump(node({ mined: 5, market: underpriced }), { ...limits, bumpsSoFar: 3 }), { hash: null, sent: [] });
  });
});

describe('attack: an unbounded wait for the relayer', () => {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  test('a send that waits past the deadline is refused (503) and never sent afterwards; a full queue refuses at once', async () => {
    const key = `test-bounds-${Math.random()}`;
    const bounds = { waitMs: 100, maxQueued: 1 };
    let release!: () => void;
    const holding = serializedSend(key, () => new Promise<string>((r) => (release = () => r('first'))), undefined, bounds);
    await sleep(5);
    let lateSendRan = false;
    const waiting = serializedSend(key, async () => ((lateSendRan = true), 'second'), undefined, bounds);
    // Order, not wall-clock limits, tells "at once" from "after the deadline": the full queue's refusal
    // must come before the waiter's, and the waiter's no sooner than its deadline (timers never fire early).
    const settled: string[] = [];
    const t0 = performance.now();
    const refusedAtOnce = assert
      .rejects(
        serializedSend(key, async () => 'third', undefined, bounds),
        RelayerCouldNotSend,
      )
      .then(() => settled.push('full queue'));
    const waiterGaveUp = assert.rejects(waiting, RelayerCouldNotSend).then(() => settled.push('waiter'));
    await Promise.all([refusedAtOnce, waiterGaveUp]);
    assert.deepEqual(settled, ['full queue', 'waiter'], 'a full queue answers before the waiter’s deadline');
    assert.ok(performance.now() - t0 >= 90, 'the waiter waited its deadline');
    release();
    assert.equal(await holding, 'first');
    await sleep(10);
    assert.equal(lateSendRan, false, 'a send given up on is not sent behind its payer’s back');
    assert.equal(await serializedSend(key, async () => 'next', undefined, bounds), 'next', 'the queue moves on');
  });
});
