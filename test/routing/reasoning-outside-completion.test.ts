import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { postChat, routingSuite, type RoutingHarness } from '../support/routing-harness.ts';
import { readServed } from '../support/sse.ts';
import { usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';

/*
 * OpenAI counts reasoning inside `completion_tokens` (`completion_tokens_details.reasoning_tokens`
 * is a part of it, and `total_tokens` is prompt + completion). xAI's Grok, an OpenAI-compatible
 * provider, reports reasoning beside the completion instead: `completion_tokens` is the visible text
 * alone, and `total_tokens` is prompt + completion + reasoning, all of it billed as output
 * (docs.x.ai "reasoning token consumption will be counted separately from completion_tokens, but
 * will be counted in the total_tokens"; the AI SDK's xAI provider and others were fixed for it).
 * The defect: the gateway read `completion_tokens` as the whole output whatever the totals said, so
 * a deployment reporting this way was billed for its visible text only: 100 prompt, 50 completion
 * and 300 reasoning tokens were charged 240 micro-USDC instead of 960, and the platform paid the
 * reasoning. Here the primary fails and such a deployment serves (the fallback a request cannot choose).
 */
const FUNDS = 1_000_000;
const PROMPT = 100;
const COMPLETION = 50;
const REASONING = 300;
/** The listed price, 1.2 and 2.4 micro-USDC a token, with the reasoning billed as output. */
const CHARGE = PROMPT * 1.2 + (COMPLETION + REASONING) * 2.4;
/** The fallback's own cost, 0.5 and 1 micro-USDC a token. */
const COST = PROMPT * 0.5 + (COMPLETION + REASONING) * 1;
const xaiTotals = (json: string) => json.replace(`"total_tokens":${PROMPT + COMPLETION}`, `"total_tokens":${PROMPT + COMPLETION + REASONING}`);

describe('a deployment reporting reasoning beside completion_tokens (xAI)', () => {
  const harness = routingSuite('sqlite', { prompt_tokens: PROMPT, completion_tokens: COMPLETION, reasoning_tokens: REASONING });
  let h: RoutingHarness;
  beforeEach(() => {
    h = harness();
    h.fake.behaviour = { failStatus: 503 };
    h.backup.behaviour = {
      usage: { prompt_tokens: PROMPT, completion_tokens: COMPLETION, reasoning_tokens: REASONING },
      rewriteAnswer: xaiTotals,
      rewriteChunk: xaiTotals,
    };
  });

  for (const stream of [false, true]) {
    test(`${stream ? 'stream' : 'JSON'}: the reasoning is billed as output at the listed price, and booked at the deployment's cost`, async () => {
      const w = await h.wallet(FUNDS);
      const res = await postChat(h, w.key, {
        model: 'fake/routed',
        messages: [{ role: 'user', content: 'hi' }],
        stream,
        ...(stream ? { stream_options: { include_usage: true } } : {}),
      });
      assert.equal(res.status, 200);
      const served = await readServed(res);
      assert.equal(served.deployment, 'backup/routed-backup');
      const row = stream ? await waitForUsageRow(h, w.keyId) : (await usageRowsOf(h, w.keyId))[0]!;
      assert.deepEqual(
        [row.status, Number(row.completion_tokens), Number(row.charged_usdc), Number(row.provider_cost_usdc)],
        ['ok', COMPLETION + REASONING, CHARGE, COST],
      );
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
    });
  }
});
