import { createParser } from 'eventsource-parser';
import { parseJsonLoosely } from '../json.ts';
import type { ProviderAdapter } from '../providers/adapter.ts';
import type { Services } from '../services.ts';
import type { RequestBill } from './bill.ts';
import type { InboundCodec } from './inbound/codec.ts';
import type { ChatPlan } from './plan.ts';
import type { ResponseSink } from './sink.ts';
import { describeTransportError, providerMessage, redactCredentials } from './upstream-error.ts';
import { logProviderFailure } from './provider-failure-log.ts';
import { StreamedText } from './streamed-text.ts';
import { estimateUsage, readUsage, type Usage } from './usage.ts';

/** How many disconnected streams are being drained right now, across this process. */
let activeDrains = 0;

/**
 * An event carrying a usage object (not `"usage": null`), compact or spaced as Python's json.dumps
 * writes it. Generated text cannot match: its quotes are escaped (`\"usage\"`).
 */
const USAGE_OBJECT = /"usage"\s*:\s*\{/;

/**
 * Streaming: 200 and the SSE headers go out first, then the provider's events, decoded by its wire
 * into internal chunks and encoded in the client's protocol, as they come (OpenAI in and out: passed
 * through as sent). Only chunks that carry usage are parsed on the way. The request is settled from
 * the provider's usage (or counted tokens) before the stream's end; an upstream failure becomes the
 * protocol's error event and is not charged. A client that leaves does not end the upstream call:
 * it is drained, within bounds, so what the provider produced is billed. A client that stays
 * connected but accepts no bytes for `chat.idleTimeoutSeconds` is cut and treated as one that left.
 */
export async function streamChat(services: Services, sink: ResponseSink, codec: InboundCodec, plan: ChatPlan, adapter: ProviderAdapter, bill: RequestBill): Promise<void> {
  const cfg = services.config.chat;
  sink.startStream({
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  const encoder = codec.streamEncoder(plan);
  const decoder = plan.wire.streamDecoder();

  let clientGone = false;
  const upstreamAbort = new AbortController();
  let drainTimer: NodeJS.Timeout | undefined;
  let draining = false;
  const stopWatchingClose = sink.onClose(() => {
    if (sink.finished) return;
    clientGone = true;
    if (activeDrains >= cfg.maxConcurrentDrains) {
      upstreamAbort.abort();
      return;
    }
    activeDrains++;
    draining = true;
    drainTimer = setTimeout(() => upstreamAbort.abort(), cfg.drainTimeoutSeconds * 1000);
  });

  const send = async (text: string) => {
    if (!text || clientGone || sink.destroyed) return;
    if (sink.write(text)) return;
    if ((await sink.waitForClient(cfg.idleTimeoutSeconds * 1000)) !== 'stalled') return;
    sink.log.warn({ idleTimeoutSeconds: cfg.idleTimeoutSeconds }, 'streaming client accepted no bytes; cutting it, the stream is drained and billed as if it had left');
    sink.destroy(); // 'close' follows: the disconnected path drains and bills
  };

  let usage: Usage | null = null;
  let sawDone = false;
  let upstreamError: string | null = null;
  let upstreamStatus: number | undefined;
  let transportError: unknown;
  const streamedText = new StreamedText();
  // What was produced so far, priced if the request ends here: the provider's own figures once it
  // sent them, otherwise the tokens counted from what it streamed.
  // A provider that reported the prompt side early (Anthropic's message_start) has it billed exactly.
  const usageSoFar = async (): Promise<Usage> => usage ?? withPromptSide(await estimateUsage(plan, streamedText.text()), readUsage(decoder.promptUsage()));
  bill.trackProduced(usageSoFar);

  try {
    try {
      const res = await adapter.chat(plan.upstreamJson, bill.requestId, upstreamAbort.signal);
      bill.markUpstreamResponse();
      upstreamStatus = res.statusCode;
      if (res.statusCode !== 200) {
        const body = await res.body.text().catch(() => '');
        upstreamError = `the provider answered ${res.statusCode}${providerMessage(body)}`;
      } else {
        const pending: string[] = [];
        const parser = createParser({
          onEvent(event) {
            for (const e of decoder.decode(event.data)) {
              if (e.kind === 'native') {
                pending.push(encoder.native?.(e.event) ?? '');
              } else if (e.kind === 'done') {
                sawDone = true;
              } else if (e.kind === 'error') {
                upstreamError = `the provider reported an error${e.providerMessage ? `: ${redactCredentials(e.providerMessage).slice(0, 300)}` : ''}`;
                return;
              } else if (USAGE_OBJECT.test(e.data)) {
                const chunk = parseJsonLoosely(e.data);
                const found = readUsage(chunk?.usage);
                if (found) usage = found;
                pending.push(encoder.chunk(e.data, Array.isArray(chunk?.choices) && chunk.choices.length === 0));
              } else {
                bill.markFirstToken();
                streamedText.add(e.data);
                pending.push(encoder.chunk(e.data, false));
              }
            }
          },
        });
        const text = new TextDecoder();
        for await (const piece of res.body) {
          parser.feed(text.decode(piece as Buffer, { stream: true }));
          if (pending.length) {
            const out = pending.join('');
            pending.length = 0;
            await send(out);
          }
          if (upstreamError) break;
        }
        if (!upstreamError && !sawDone && !usage) upstreamError = 'the provider ended the stream early';
      }
    } catch (err) {
      if (!(clientGone && upstreamAbort.signal.aborted)) {
        upstreamError = describeTransportError(err);
        transportError = err;
      }
    }

    if (upstreamError && !(clientGone && upstreamAbort.signal.aborted)) {
      logProviderFailure(sink.log, plan, bill.requestId, { status: upstreamStatus, error: transportError, detail: upstreamError });
      await bill.void('upstream_error');
      await send(encoder.failure(`${upstreamError}; nothing was charged`));
      return;
    }
    // Complete, or cut short by our own drain bound after the client left: bill what was produced.
    const billed = await usageSoFar();
    await bill.settle(billed, clientGone ? 'client_disconnected' : 'ok');
    await send(encoder.end(billed));
  } finally {
    if (drainTimer) clearTimeout(drainTimer);
    if (draining) activeDrains--;
    stopWatchingClose();
    await bill.voidIfOpen('error');
    if (!sink.destroyed) sink.end();
  }
}

/** The estimate with the prompt side the provider reported (exact), when it reported one. */
function withPromptSide(estimate: Usage, reported: Usage | null): Usage {
  if (!reported) return estimate;
  return { ...estimate, promptTokens: reported.promptTokens, cachedTokens: reported.cachedTokens, cacheWriteTokens: reported.cacheWriteTokens, cacheReadTokens: reported.cacheReadTokens };
}
