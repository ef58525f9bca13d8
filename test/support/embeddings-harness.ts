import assert from 'node:assert/strict';
import type { Engine } from '../../src/storage/database.ts';
import { fakeEmbedding } from '../../src/fake-providers/fake-openai-embeddings.ts';
import { fakeTokens } from '../../src/fake-providers/fake-tokens.ts';
import { MODELS, startChatHarness, type ChatHarness } from './chat-harness.ts';
import { mergeConfig } from './gateway.ts';
import { usageRowsOf } from './usage-rows.ts';

/**
 * An embedding model priced so that charges are easy to check by hand: 10 USD per 1M prompt tokens
 * with the harness's 20% markup is exactly 12 micro-USDC a token.
 */
export const EMBEDDING_MODEL = { provider: 'fake', name: 'embed-small', type: 'embedding', contextLength: 8191, promptCostPer1M: '10' };
export const EMBED_ID = 'fake/embed-small';
export const MICRO_PER_TOKEN = 12;

/** The chat harness's gateway and fake provider with the embedding model added to its catalog. */
export function startEmbeddingsHarness(engine: Engine, config: Record<string, unknown> = {}): Promise<ChatHarness> {
  return startChatHarness(engine, mergeConfig({ models: [...MODELS, EMBEDDING_MODEL] }, config));
}

/** Prompt tokens the fake bills for these string inputs. */
export const fakeTokensOf = (inputs: string[]) => inputs.reduce((sum, text) => sum + fakeTokens(text), 0);

/** The vector the fake provider answers for `input` (float32 values). */
export const expectedVector = (input: string | number[], dimensions?: number) => fakeEmbedding(input, dimensions);

/**
 * The wallet was charged exactly `tokens` at the model's price, once: the balance moved by that much,
 * nothing is left locked, and the key has one usage row with the tokens and the charge.
 */
export async function assertBilledOnce(
  h: ChatHarness,
  w: { account: Parameters<ChatHarness['balance']>[0]; keyId: number },
  funds: number,
  tokens: number,
): Promise<void> {
  const charged = tokens * MICRO_PER_TOKEN;
  assert.deepEqual(await h.balance(w.account), { balance_usdc: funds - charged, locked_usdc: 0, available_usdc: funds - charged });
  const rows = await usageRowsOf(h, w.keyId);
  assert.equal(rows.length, 1);
  const row = rows[0]!;
  assert.deepEqual(
    [row.model, row.status, Number(row.prompt_tokens), Number(row.completion_tokens), Number(row.charged_usdc)],
    [EMBED_ID, 'ok', tokens, 0, charged],
  );
  await h.gw.assertLedger();
}
