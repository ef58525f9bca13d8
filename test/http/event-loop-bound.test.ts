import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { jsonBoundsProblem } from '../../src/http/json-body.ts';
import { parseConfig } from '../../src/config/load.ts';
import { watchTurns } from '../support/loop-hold.ts';

// Parsed whole, a 10 MiB body of `{}` objects takes 1.6 s of event-loop time, a deeply nested
// one 4.9 s, while every other client waited. JSON.parse time follows the number of values and
// key bytes, not the byte count, so bodies are scanned for depth, values and key bytes before
// being parsed (src/http/json-body.ts).
//
// The goal is "no request blocks the event loop for more than 50 ms at the default limits". A
// 50 ms assertion would be a timing threshold, which this suite does not allow (2 shared cores, other
// suites running). So the test asserts the behaviour (400 naming the bound) and a generous 250 ms
// ceiling on one turn's CPU time that still catches the 1.6 to 4.9 s stalls, and prints the measured maximum.

// The default limits.chatBodyBytes (4 MiB): larger bodies are 413 before they are parsed.
const MAX_BODY = parseConfig({}).limits.chatBodyBytes;

describe('no single request stalls the event loop', () => {
  let h: ChatHarness;
  let key: string;
  before(async () => {
    h = await startChatHarness('sqlite');
    key = (await h.wallet(1_000_000)).key;
  });
  after(() => h.stop());

  // The delay histogram is printed; the bound is asserted on the CPU time of the longest turn (test/support/loop-hold.ts),
  // since on a loaded machine the scheduler alone stretches the wall-clock delay.
  async function postMeasured(body: string): Promise<{ status: number; body: any; maxDelayMs: number; longestTurnMs: number }> {
    const monitor = monitorEventLoopDelay({ resolution: 5 });
    monitor.enable();
    const turns = watchTurns();
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body,
    });
    const json = await res.json();
    const longestTurnMs = turns.stop();
    monitor.disable();
    return { status: res.status, body: json, maxDelayMs: monitor.max / 1e6, longestTurnMs };
  }

  const flatObjects = () => {
    const head = '{"model":"fake/chat-small","messages":[';
    return `${head}${'{},'.repeat(Math.floor((MAX_BODY - head.length - 10) / 3))}{}]}`;
  };

  const cases: [string, () => string, RegExp | null][] = [
    ['a maximal flat body of {} objects', flatObjects, /more than 20000 values/],
    ['a maximal body of nested arrays', () => '['.repeat(MAX_BODY - 1), /nested deeper than 64 levels/],
    ['a maximal body of nested objects', () => '{"a":'.repeat(Math.floor(MAX_BODY / 5)), /nested deeper than 64 levels/],
    [
      'a maximal body of distinct keys',
      () => `{${Array.from({ length: 700_000 }, (_, i) => `"k${i}":1`).join(',')}}`.slice(0, MAX_BODY - 1),
      /more than 20000 values/,
    ],
    [
      'a maximal message text (accepted by the bounds)',
      () => JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'a'.repeat(MAX_BODY - 100) }] }),
      null,
    ],
  ];

  for (const [name, build, refusal] of cases) {
    test(name, async () => {
      const body = build();
      assert.ok(body.length <= MAX_BODY);
      const r = await postMeasured(body);
      console.log(`${name}: ${r.status}, max event-loop delay ${r.maxDelayMs.toFixed(1)} ms, longest turn ${r.longestTurnMs.toFixed(1)} ms of CPU`);
      if (refusal) {
        assert.equal(r.status, 400);
        assert.equal(r.body.error, 'VALIDATION_ERROR');
        assert.match(r.body.message, refusal);
        assert.ok(r.longestTurnMs < 250, `one turn of the event loop took ${r.longestTurnMs.toFixed(0)} ms of CPU`);
      } else {
        // Accepted, this body goes on through planning, the reservation and the fake provider,
        // which runs in this same process and parses it too: its delay is printed for the record,
        // not asserted (it measures the whole chat path on a shared 2-core machine, not the edge).
        assert.doesNotMatch(String(r.body.message), /nested deeper|values|keys are longer/);
      }
      await h.gw.assertLedger();
    });
  }
});

describe('the JSON bounds scan', () => {
  const bounds = { maxDepth: 3, maxValues: 10 };
  const check = (text: string) => jsonBoundsProblem(Buffer.from(text), bounds);

  test('counts depth and values outside strings only', () => {
    assert.equal(check('[[[1]]]'), null);
    assert.match(check('[[[[1]]]]')!, /deeper than 3/);
    assert.equal(check('["[[[[[[", "]]]]{{{{,,,,,,,,,,,,"]'), null, 'brackets and commas inside strings do not count');
    assert.equal(check('["\\"[[[[[", "\\\\", "[[[["]'), null, 'escaped quotes do not end a string');
    assert.match(check('["\\\\"[[[[[]]]]]]')!, /deeper/, 'an escaped backslash does end it');
    assert.match(check(`[${'1,'.repeat(10)}1]`)!, /more than 10 values/);
    assert.equal(check(`[${'1,'.repeat(8)}1]`), null);
  });

  test('bounds the total length of object keys', () => {
    assert.equal(check(`{"${'k'.repeat(320)}":1}`), null);
    assert.match(check(`{"${'k'.repeat(321)}" :1}`)!, /keys are longer than 320 bytes/);
    assert.equal(check(`["${'v'.repeat(10_000)}"]`), null, 'values are not keys');
  });

  test('the nesting limit is exactly the configured depth through the API too', () => {
    const at = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
    assert.equal(jsonBoundsProblem(Buffer.from(at(64)), { maxDepth: 64, maxValues: 20_000 }), null);
    assert.match(jsonBoundsProblem(Buffer.from(at(65)), { maxDepth: 64, maxValues: 20_000 })!, /deeper than 64/);
  });
});
