import type { ProviderAdapter } from '../providers/adapter.ts';
import type { RequestBill } from './bill.ts';
import type { ChatDeps, DrainBudget } from './deps.ts';
import type { InboundTranslator } from '../protocols/inbound.ts';
import type { ChatPlan } from './plan.ts';
import type { AnswerKeeper, ResponseSink } from './sink.ts';
import { describeTransportError, providerMessage } from './upstream-error.ts';
import { logProviderFailure } from './provider-failure-log.ts';
import { StreamPump } from './stream-pump.ts';
import { chargeOf } from '../protocols/charge.ts';

/**
 * Streaming: 200 and the SSE headers go out first, then the provider's events, decoded by its upstream translator
 * into internal chunks and encoded in the client's protocol, as they come (OpenAI in and out: passed
 * through as sent; the bytes themselves are the pump's, stream-pump.ts). The request is settled from
 * the provider's usage (or counted tokens) before the stream's end; an upstream failure becomes the
 * protocol's error event and is not charged. A client that leaves does not end the upstream call:
 * it is drained, within bounds, so what the provider produced is billed. A client that stays
 * connected but accepts no bytes for `chat.idleTimeoutSeconds` is cut and treated as one that left.
 */
export async function streamChat(deps: ChatDeps, sink: ResponseSink, inbound: InboundTranslator, plan: ChatPlan, adapter: ProviderAdapter, bill: RequestBill, keeper?: AnswerKeeper): Promise<void> {
  sink.startStream({
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  const encoder = inbound.streamEncoder(plan);
  const pump = new StreamPump(plan.upstream.streamDecoder(), encoder, plan, () => bill.markFirstToken());

  const upstreamAbort = new AbortController();
  const client = watchClient(sink, deps.drains, upstreamAbort);
  const send = async (text: string) => {
    if (!text || client.gone || sink.destroyed) return;
    if (sink.write(text)) return;
    if ((await sink.waitForClient(deps.idleTimeoutMs)) !== 'stalled') return;
    sink.log.warn({ idleTimeoutSeconds: deps.idleTimeoutMs / 1000 }, 'streaming client accepted no bytes; cutting it, the stream is drained and billed as if it had left');
    sink.destroy(); // 'close' follows: the disconnected path drains and bills
  };
  bill.trackProduced(() => pump.produced());

  let upstreamError: string | null = null;
  let upstreamStatus: number | undefined;
  let transportError: unknown;
  try {
    try {
      const res = await adapter.chat(plan.upstreamJson, bill.requestId, upstreamAbort.signal, plan.upstreamHeaders);
      bill.markUpstreamResponse();
      upstreamStatus = res.statusCode;
      if (res.statusCode !== 200) {
        const body = await res.body.text().catch(() => '');
        upstreamError = `the provider answered ${res.statusCode}${providerMessage(body)}`;
      } else {
        for await (const piece of res.body) {
          const out = pump.feed(piece as Buffer);
          if (out) await send(out);
          if (pump.error) break;
        }
        pump.ended();
        upstreamError = pump.error;
      }
    } catch (err) {
      if (!(client.gone && upstreamAbort.signal.aborted)) {
        upstreamError = describeTransportError(err);
        transportError = err;
      }
    }

    if (upstreamError && !(client.gone && upstreamAbort.signal.aborted)) {
      logProviderFailure(sink.log, plan, bill.requestId, { status: upstreamStatus, error: transportError, detail: upstreamError });
      await bill.void('upstream_error');
      await send(encoder.failure(`${upstreamError}; nothing was charged`));
      return;
    }
    // Complete, or cut short by our own drain bound after the client left: bill what was produced.
    const billed = await pump.produced();
    const settled = await bill.settle(billed, client.gone ? 'client_disconnected' : 'ok');
    // The final object is kept only once paid for, and before its last event goes out; both carry
    // the charge, unless the settle was not applied (then none is claimed).
    const charge = chargeOf(settled);
    let kept: string | undefined;
    if (keeper && settled.applied && encoder.finalAnswer) kept = (await keeper.keep(encoder.finalAnswer(billed, charge))).answer;
    await send(encoder.end(billed, kept, charge));
  } finally {
    client.stop();
    await bill.voidIfOpen('error');
    if (!sink.destroyed) sink.end();
  }
}

/**
 * Watches the client's connection. Once it leaves before the end, the upstream call is drained
 * while the gateway's drain budget has room (and aborted after the drain timeout), or aborted at
 * once when it has none. `stop` ends the watch and gives the drain slot back.
 */
function watchClient(sink: ResponseSink, drains: DrainBudget, upstreamAbort: AbortController): { readonly gone: boolean; stop(): void } {
  let gone = false;
  let release: (() => void) | null = null;
  let drainTimer: NodeJS.Timeout | undefined;
  const stopWatching = sink.onClose(() => {
    if (sink.finished) return;
    gone = true;
    release = drains.tryStart();
    if (!release) {
      upstreamAbort.abort();
      return;
    }
    drainTimer = setTimeout(() => upstreamAbort.abort(), drains.timeoutMs);
  });
  return {
    get gone() {
      return gone;
    },
    stop() {
      if (drainTimer) clearTimeout(drainTimer);
      release?.();
      stopWatching();
    },
  };
}
