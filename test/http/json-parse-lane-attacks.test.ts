import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CLAUDE, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { parseConfig } from '../../src/config/load.ts';
import { watchTurns } from '../support/loop-hold.ts';
import { countTokens } from '../../src/metered/usage-estimate.ts';
import { MAX_NUMBER_CHARS } from '../../src/http/json-body.ts';

/*
 * A number token longer than MAX_NUMBER_CHARS is refused by the bounds scan before JSON.parse
 * (src/http/json-body.ts); below, the long numbers are refused and the longest allowed ones parse
 * within the rule. The CPU lane parses a large JSON body in one turn of its own (src/http/json-body.ts), and
 * jsonBoundsProblem bounds the values and depth first. JSON.parse costs time per value, per key
 * byte, and per digit of a number whose rounding needs big-integer arithmetic: numbers of a few
 * hundred digits at the edge of the double range (2^-1075, halfway between 0 and the smallest
 * denormal, written out in full) cost V8 ~25 µs each. 20,000 of them (under jsonMaxValues) in 4 MiB
 * (under the body limits) are one parse of 100+ ms in one turn, for any key, on every JSON route.
 * SECURITY.md's rule: no body holds the loop more than about 50 ms. The bound asserted is the CPU
 * time of the longest turn (not wall time, which the scheduler inflates), at the same 250 ms as the
 * other loop tests (test/http/count-tokens-loop.test.ts): CPU time too grows on a machine running
 * two test files beside their servers (a 75 ms bound failed once so, where the turn took 17-44 ms
 * alone). The long-number attack itself is caught by its 400, not by this bound.
 */
const CPU_BOUND_MS = 250;
const LIMITS = parseConfig({}).limits;

/** 2^-1075 written out: V8 must compare it digit by digit to round it (to 0 or the smallest denormal). */
const HALFWAY =
  '2.4703282292062327208828439643411068618252990130716238221279284125033775363510437593264991818081799618989828234772285886546332835517796989819938739800539093906315035659515570226392290858392449105184435931802849936536152500319370457678249219365623669863658480757001585769269903706311928279558551332927834338409351978015531246597263579574622766465272827220056374006485499977096599470454020828166226237857393450736339007967761930577506740176324673600968951340535537458516661134223766678604162159680461914467291840300530057530849048765391711386591646239524912623653881879636239373280423891018672348497668235089863388587925628302755995657524455507255189313690836254779186948667994968324049705821028513185451396213837722826145437693412532098591327667236328125e-324';

/** The same number cut to the longest a body may hold: still costlier than a short one to round. */
const LONGEST_ALLOWED = `${HALFWAY.slice(0, MAX_NUMBER_CHARS - 5)}e-324`;

/** A body under `limit` bytes and under jsonMaxValues: `head` with a field holding as many such numbers as fit. */
function numbersBody(head: Record<string, unknown>, limit: number, number = HALFWAY): string {
  const n = Math.min(LIMITS.jsonMaxValues - 100, Math.floor((limit - 4096) / (number.length + 1)));
  const text = JSON.stringify({ ...head, numbers: [] }).replace('"numbers":[]', `"numbers":[${Array(n).fill(number).join(',')}]`);
  assert.ok(Buffer.byteLength(text) < limit);
  return text;
}

describe('attack: a JSON body whose numbers are costly to round, parsed in one turn of the CPU lane', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE] });
    // The tokenizer's one-time load is not what these tests measure.
    await countTokens('warm up');
  });
  after(() => h.stop());

  const routes = [
    { path: '/v1/messages/count_tokens', limit: LIMITS.countTokensBodyBytes, head: { model: 'anth/claude-test', messages: [{ role: 'user', content: 'hi' }] } },
    { path: '/v1/chat/completions', limit: LIMITS.chatBodyBytes, head: { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] } },
  ];
  for (const { path, limit, head } of routes) {
    test(`${path}: 4 MiB of long denormal numbers is a 400 naming the limit, and does not hold the loop more than ${CPU_BOUND_MS} ms of CPU`, async () => {
      const { key } = await h.wallet(0);
      const body = numbersBody(head, limit);
      const turns = watchTurns();
      const res = await fetch(`${h.gw.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key, authorization: `Bearer ${key}` },
        body,
      });
      const answer = await res.text();
      const longest = turns.stop();
      console.log(`${path}: ${body.length} bytes, status ${res.status} ${answer.slice(0, 200)}, longest turn ${longest.toFixed(1)} ms of CPU`);
      assert.equal(res.status, 400, answer);
      assert.match(answer, /VALIDATION_ERROR|invalid_request_error/);
      assert.match(answer, new RegExp(`number written in more than ${MAX_NUMBER_CHARS} characters`));
      assert.ok(longest < CPU_BOUND_MS, `one turn of the event loop took ${longest.toFixed(0)} ms of CPU`);
    });

    test(`${path}: numbers of the longest allowed length (${MAX_NUMBER_CHARS} characters), as many as fit, do not hold the loop more than ${CPU_BOUND_MS} ms of CPU`, async () => {
      const { key } = await h.wallet(0);
      const body = numbersBody(head, limit, LONGEST_ALLOWED);
      const turns = watchTurns();
      const res = await fetch(`${h.gw.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key, authorization: `Bearer ${key}` },
        body,
      });
      const answer = await res.text();
      const longest = turns.stop();
      console.log(`${path}: ${body.length} bytes, status ${res.status} ${answer.slice(0, 200)}, longest turn ${longest.toFixed(1)} ms of CPU`);
      assert.ok(res.status < 500, answer);
      assert.ok(longest < CPU_BOUND_MS, `one turn of the event loop took ${longest.toFixed(0)} ms of CPU`);
    });
  }
});
