import assert from 'node:assert/strict';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import type { ChatHarness } from '../support/chat-harness.ts';
import type { TestGateway } from '../support/gateway.ts';

/**
 * What the small-wallet tests share: models at $1 and $2 per million tokens, one naming its tokenizer
 * (o200k) and one the same without it (the byte bound), and what an OpenAI provider bills for a chat body.
 */

/** Listed at $1 and $2 per million tokens, no markup: 1 and 2 micro-USDC a token. */
export const PRICES = { promptCostPer1M: '1', completionCostPer1M: '2', promptPricePer1M: '1', completionPricePer1M: '2' };
export const GPT = { provider: 'fake', name: 'gpt-small-wallet', contextLength: 200_000, maxOutputTokens: 4096, tokenizer: 'o200k', ...PRICES };
export const GPT_BYTES = { ...GPT, name: 'gpt-no-tokenizer', tokenizer: undefined };
export const OUTPUT_TOKENS = 7;

export const plain = { disallowedSpecial: new Set<string>() };
/** What an OpenAI provider bills for a chat body (the cookbook's rules, the real o200k tokenizer): messages and tool definitions. */
export function o200kPromptTokens(body: any): number {
  const text = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v ?? ''));
  let total = 3;
  for (const m of body.messages) total += 3 + countTokens(`${m.role}${text(m.content)}${m.tool_calls ? JSON.stringify(m.tool_calls) : ''}`, plain);
  for (const t of body.tools ?? []) total += 19 + countTokens(JSON.stringify(t.function), plain);
  return total;
}

/**
 * The one request of wallet `w` (funded with `funds`) was billed exactly `prompt` prompt tokens and
 * OUTPUT_TOKENS at $1/$2, nothing stays locked, and the reservation covered what the provider billed.
 */
export async function expectBilledExactly(h: Pick<ChatHarness, 'gw' | 'balance'>, w: { account: any; keyId: number }, funds: number, prompt: number) {
  const charge = prompt * 1 + OUTPUT_TOKENS * 2;
  const row = await h.gw.services.storage.db
    .selectFrom('request_usage')
    .select(['charged_usdc', 'prompt_tokens', 'completion_tokens'])
    .where('api_key_id', '=', w.keyId)
    .executeTakeFirstOrThrow();
  const billed = { charged: Number(row.charged_usdc), prompt: Number(row.prompt_tokens), completion: Number(row.completion_tokens) };
  assert.deepEqual(billed, { charged: charge, prompt, completion: OUTPUT_TOKENS });
  const balance = await h.balance(w.account);
  assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: funds - charge, locked: 0 });
  assert.equal(await overReservations(h), 0, "the reservation bounded the provider's bill");
}

export async function overReservations(h: { gw: TestGateway }): Promise<number> {
  return (await h.gw.services.metrics.overReservation.get()).values.reduce((sum, v) => sum + v.value, 0);
}
