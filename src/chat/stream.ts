import type { RequestBill } from './bill.ts';
import type { ChatDeps, DrainBudget } from './deps.ts';
import type { InboundTranslator } from '../protocols/inbound.ts';
import type { ChatPlan } from './plan.ts';
import type { AnswerKeeper, ResponseSink } from './sink.ts';
import { describeTransportError } from './upstream-error.ts';
import { callDeployments, chainFailure } from './deployment-call.ts';
import { logProviderFailure } from './provider-failure-log.ts';
import { StreamPump } from './stream-pump.ts';
import { chargeOf } from '../protocols/charge.ts';

/**
 * Streaming: the plan's deployments are called in turn (src/chat/deployment-call.ts) until one
 * answers 200; only then do 200 and the SSE headers go out (naming the deployment that serves), so
 * a request no deployment could serve is a plain 502 JSON error with nothing charged, never a
 * broken stream. Then the provider's events are decoded by that deployment's upstream translator
 * into internal chunks and encoded in the client's protocol, as they come (OpenAI in and out:
 * passed through as sent; the bytes themselves are the pump's, stream-pump.ts). The request is
 * settled from the provider's usage (or counted tokens) before the stream's end; a failure once the
 * stream started becomes the protocol's error event, is not retried elsewhere (bytes reached the
 * client) and is not charged. A client that leaves does not end the upstream call: it is drained,
 * within bounds, so what the provider produced is billed. A client that stays connected but accepts
 * no bytes for `chat.idleTimeoutSeconds` is cut and treated as one that left.
 */
export async function streamChat(deps: ChatDeps, sink: ResponseSink, inbound: InboundTranslator, plan: ChatPlan, bill: RequestBill, keeper?: AnswerKeeper): Promise<void> {
  const upstreamAbort = new AbortController();
  const client = watchClient(sink, deps.drains, upstreamAbort);
  let started = false;
  try {
    const chain = await callDeployments(deps, sink.log, plan, bill.requestId, { signal: upstreamAbort.signal, cancelled: () => client.gone });
    if (!chain.ok) {
      await bill.void(client.gone ? 'client_disconnected' : 'upstream_error');
      throw chainFailure(plan, chain);
    }
    const { target: route, value: res } = chain;
    bill.servedBy(route.deployment);
    bill.markUpstreamResponse();
    sink.header('x-tollgate-deployment', route.deployment.id);
    sink.startStream({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    started = true;
    const encoder = inbound.streamEncoder(plan);
    const pump = new StreamPump(route.upstream.streamDecoder(), encoder, plan, () => bill.markFirstToken());
    const send = async (text: string) => {
      if (!text || client.gone || sink.destroyed) return;
      if (sink.write(text)) return;
      if ((await sink.waitForClient(deps.idleTimeoutMs)) !== 'stalled') return;
      sink.log.warn({ idleTimeoutSeconds: deps.idleTimeoutMs / 1000 }, 'streaming client accepted no bytes; cutting it, the stream is drained and billed as if it had left');
      sink.destroy(); // 'close' follows: the disconnected path drains and bills
    };
    bill.trackProduced(() => pump.produced());

    let upstreamError: string | null = null;
    let transportError: unknown;
    try {
      for await (const piece of res.body) {
        const out = pump.feed(piece as Buffer);
        if (out) await send(out);
        if (pump.error) break;
      }
      pump.ended();
      upstreamError = pump.error;
    } catch (err) {
      if (!(client.gone && upstreamAbort.signal.aborted)) {
        upstreamError = describeTransportError(err);
        transportError = err;
      }
    }

    if (upstreamError && !(client.gone && upstreamAbort.signal.aborted)) {
      logProviderFailure(sink.log, plan, route.deployment, bill.requestId, { status: res.statusCode, error: transportError, detail: upstreamError });
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
    if (started && !sink.destroyed) sink.end();
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
