import { startFakeOpenAI, type FakeBehaviour } from '../src/fake-providers/fake-openai.ts';

/**
 * The benchmark's upstream, in its own process so its CPU is not charged to any target. It speaks
 * OpenAI's wire format; a stream is a role chunk, 20 content chunks, a finish chunk and the usage
 * chunk. The model name picks the pace: bench-fast back-to-back, bench-paced 5 ms apart,
 * bench-slow 500 ms apart (to hold thousands of streams open).
 */
const CONTENT = Array.from({ length: 20 }, (_, i) => `word${i} `)
  .join('')
  .trimEnd();
const PACES: Record<string, FakeBehaviour> = {
  'bench-fast': { content: CONTENT },
  'bench-paced': { content: CONTENT, chunkDelayMs: 5 },
  'bench-slow': { content: CONTENT, chunkDelayMs: 500 },
};
const fake = await startFakeOpenAI({ record: false, behaviourFor: (body) => PACES[body?.model] ?? PACES['bench-fast'] });
process.stdout.write(`${JSON.stringify({ ready: true, url: fake.url })}\n`);
process.on('SIGTERM', () => process.exit(0));
