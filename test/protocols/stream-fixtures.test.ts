import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { StreamPump } from '../../src/metered/stream-pump.ts';
import type { ChatPlan } from '../../src/metered/plan/plan.ts';
import { anthropicMessagesInbound } from '../../src/protocols/anthropic-messages/inbound.ts';
import { anthropicNativeUpstream } from '../../src/protocols/anthropic-messages/native-upstream.ts';
import { anthropicUpstream } from '../../src/protocols/anthropic-messages/upstream.ts';
import type { InboundTranslator } from '../../src/protocols/inbound.ts';
import { openAIChatInbound } from '../../src/protocols/openai-chat/inbound.ts';
import { openAIChatUpstream } from '../../src/protocols/openai-chat/upstream.ts';
import { responsesInbound } from '../../src/protocols/openai-responses/inbound.ts';
import type { UpstreamTranslator } from '../../src/protocols/upstream.ts';

/**
 * Every stream translation the gateway performs, on recorded provider streams (fixtures/*.sse):
 * provider bytes → the provider's decoder → the client protocol's encoder, through the same pump
 * the pipeline uses, compared with the recorded client stream in fixtures/encoded/. A change to a
 * translator that changes what clients receive shows up here as a diff, with no server running.
 *
 * When a change is meant, rewrite the recorded answers with `UPDATE_FIXTURES=1 npm test -- stream-fixtures`
 * and review the diff like code. Generated ids and the current time are written as placeholders.
 */

const here = (path: string) => new URL(path, import.meta.url);
const UPDATE = process.env.UPDATE_FIXTURES === '1';

interface Upstream {
  name: string;
  translator: UpstreamTranslator;
  native: boolean;
  recordings: string[];
}
const UPSTREAMS: Upstream[] = [
  { name: 'openai', translator: openAIChatUpstream, native: false, recordings: ['openai-stream', 'openai-stream-tools'] },
  { name: 'anthropic', translator: anthropicUpstream, native: false, recordings: ['anthropic-stream', 'anthropic-stream-tools'] },
];
const INBOUNDS: Array<{ name: string; translator: InboundTranslator }> = [
  { name: 'openai-chat', translator: openAIChatInbound },
  { name: 'openai-responses', translator: responsesInbound },
  { name: 'anthropic-messages', translator: anthropicMessagesInbound },
];
/** Anthropic's stream relayed to an Anthropic client as sent (a native plan). */
const NATIVE = { name: 'anthropic-native', translator: anthropicNativeUpstream, native: true, recordings: ['anthropic-stream', 'anthropic-stream-tools'] };

function planFor(native: boolean): ChatPlan {
  return {
    model: { upstreamName: 'recorded-model' },
    clientWantsUsage: true,
    native,
    upstreamBody: { model: 'recorded-model', messages: [{ role: 'user', content: 'hi' }] },
    parts: { tokens: 0, bytes: 0 },
    promptUpperBound: 10_000,
    maxTokens: 1_000,
    n: 1,
  } as unknown as ChatPlan;
}

/** The client stream for one recording, fed to the pump `pieceBytes` bytes at a time. */
async function translate(recording: string, upstream: UpstreamTranslator, inbound: InboundTranslator, native: boolean, pieceBytes: number): Promise<string> {
  const plan = planFor(native);
  const pump = new StreamPump(upstream.streamDecoder(), inbound.streamEncoder(plan), plan);
  const body = readFileSync(here(`fixtures/${recording}.sse`));
  let out = '';
  for (let i = 0; i < body.length; i += pieceBytes) out += pump.feed(body.subarray(i, i + pieceBytes));
  pump.ended();
  assert.equal(pump.error, null, `the recording ${recording} decodes without error`);
  return out + pump.encoder.end(await pump.produced(), undefined, RECORDED_CHARGE);
}

/** What the ledger charged, as the pipeline hands it to `end` (it rides on the final usage). */
const RECORDED_CHARGE = { usdc: 1234, deferred: false };

/** Ids the gateway generates and the clock are not part of the recording. */
function placeholders(stream: string): string {
  const now = Math.floor(Date.now() / 1000);
  return stream.replace(/\b(resp|msg|fc)_[0-9a-f]{32}\b/g, '$1_<generated>').replace(/\b1\d{9}\b/g, (n) => (Math.abs(Number(n) - now) < 86_400 ? '<now>' : n));
}

function compare(actual: string, recordedAs: string): void {
  const path = here(`fixtures/encoded/${recordedAs}.sse`);
  if (UPDATE) {
    mkdirSync(here('fixtures/encoded/'), { recursive: true });
    writeFileSync(path, actual);
    return;
  }
  assert.ok(existsSync(path), `no recorded client stream ${recordedAs}.sse: run with UPDATE_FIXTURES=1 and review it`);
  assert.equal(actual, readFileSync(path, 'utf8'));
}

const cases = [
  ...UPSTREAMS.flatMap((u) => u.recordings.flatMap((r) => INBOUNDS.map((i) => ({ recording: r, upstream: u, inbound: i })))),
  ...NATIVE.recordings.map((r) => ({ recording: r, upstream: NATIVE, inbound: { name: 'anthropic-messages', translator: anthropicMessagesInbound } })),
];

describe('stream translators on recorded provider streams', () => {
  for (const { recording, upstream, inbound } of cases) {
    const recordedAs = `${recording}.${upstream.native ? 'native' : 'to'}.${inbound.name}`;
    test(`${recording} (${upstream.name}) → ${inbound.name}: the recorded client stream, whatever the provider's piece boundaries`, async () => {
      const whole = placeholders(await translate(recording, upstream.translator, inbound.translator, upstream.native, Number.MAX_SAFE_INTEGER));
      // 7-byte pieces split events, lines and multi-byte characters: the output must not change.
      const pieces = placeholders(await translate(recording, upstream.translator, inbound.translator, upstream.native, 7));
      assert.equal(pieces, whole);
      compare(whole, recordedAs);
    });
  }
});
