import assert from 'node:assert/strict';
import { test } from 'node:test';
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
