import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { StreamedText } from '../../src/metered/streamed-text.ts';

const contentEvent = (text: string) => JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: text } }] });

test('a stream long enough to be folded many times keeps every word, in order', () => {
  const streamed = new StreamedText();
  const words = Array.from({ length: 5000 }, (_, i) => `w${i} `);
  for (const w of words) streamed.add(contentEvent(w));
  assert.equal(streamed.text(), words.join(''));
});

test('tool-call names and arguments count as text; events without text and bad JSON are skipped', () => {
  const streamed = new StreamedText();
  streamed.add(contentEvent('Hi'));
  streamed.add(JSON.stringify({ choices: [{ delta: { tool_calls: [{ index: 0, function: { name: 'lookup', arguments: '{"q":' } }] } }] }));
  streamed.add(JSON.stringify({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '"x"}' } }] } }] }));
  streamed.add(JSON.stringify({ choices: [{ delta: { role: 'assistant' } }] }));
  streamed.add('{"choices": [ cut off');
  streamed.add(JSON.stringify({ choices: 'not a list' }));
  streamed.add(contentEvent('!'));
  assert.equal(streamed.text(), 'Hilookup{"q":"x"}!');
  assert.equal(streamed.text(), 'Hilookup{"q":"x"}!', 'reading the text twice gives the same text');
});

test('an event its decoder already parsed gives the same text as its JSON, in order, mixed with unparsed ones', () => {
  const events = [
    contentEvent('Hi'),
    JSON.stringify({ choices: [{ delta: { tool_calls: [{ index: 0, function: { name: 'lookup', arguments: '{"q":' } }] } }] }),
    contentEvent(' there'),
    JSON.stringify({ choices: [{ delta: { reasoning_content: 'think' } }] }),
    contentEvent('!'),
  ];
  const raw = new StreamedText();
  for (const e of events) raw.add(e);
  const parsed = new StreamedText();
  for (const e of events) parsed.add(e, JSON.parse(e));
  const mixed = new StreamedText();
  events.forEach((e, i) => mixed.add(e, i % 2 ? JSON.parse(e) : undefined));
  assert.equal(parsed.text(), raw.text());
  assert.equal(mixed.text(), raw.text());
  assert.equal(raw.text(), 'Hilookup{"q": therethink!');
});

test("a held stream of parsed events keeps its words, not its events' JSON", () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  // What an OpenAI chunk looks like on the wire, a word each, every event a fresh string.
  const wire = (i: number) =>
    JSON.stringify({
      id: `chatcmpl-${i}`,
      object: 'chat.completion.chunk',
      created: 1764460800,
      model: 'gpt-4o-mini',
      choices: [{ index: 0, delta: { content: ` w${i}` }, finish_reason: null }],
    });
  const perStream = (withParsed: boolean) => {
    gc();
    const before = process.memoryUsage().heapUsed;
    const held = Array.from({ length: 300 }, () => {
      const t = new StreamedText();
      for (let i = 0; i < 12; i++) {
        const e = wire(i);
        t.add(e, withParsed ? JSON.parse(e) : undefined);
      }
      return t;
    });
    gc();
    const bytes = (process.memoryUsage().heapUsed - before) / held.length;
    assert.equal(held.length, 300);
    return bytes;
  };
  const raw = perStream(false);
  const words = perStream(true);
  assert.ok(raw > 1500, `12 events' JSON held ${raw.toFixed(0)} B a stream`);
  assert.ok(words < raw / 3, `parsed events held ${words.toFixed(0)} B a stream, against ${raw.toFixed(0)} B for their JSON`);
});
