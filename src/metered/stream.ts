import type { RequestBill } from './bill.ts';
import type { ChatDeps, DrainBudget } from './deps.ts';
import type { InboundTranslator } from '../protocols/inbound.ts';
import type { ChatPlan } from './plan/plan.ts';
import type { AnswerKeeper, ResponseSink } from './sink.ts';
import { describeTransportError } from './upstream-error.ts';
import { callDeployments, chainFailure } from './deployment-call.ts';
import { logProviderFailure } from './provider-failure-log.ts';
import { StreamPump } from './stream-pump.ts';
import { chargeOf } from '../protocols/charge.ts';

/**
 * Streaming, in the spec's order (4.7 rules 3-4): 200 and the SSE headers go out before any
 * provider is called (with the protocol's opening events, when it has any), then the plan's
 * deployments are called in turn (src/metered/deployment-call.ts) until one answers 200. The headers
 * commit to nothing: fallbacks, retries and cooldowns work as for a JSON request until the first
 * byte of the answer, and a request no deployment served ends with the protocol's error event,
 * nothing charged. The deployment that serves is named in the stream, by an SSE comment before its
 * first event (its headers left before any deployment answered). `chat.streamErrorsAsStatus` keeps the headers
 * until a deployment answered instead, so a request none served is a plain HTTP error (as OpenAI's
 * own API answers, which the SDKs retry); the deployment is then a header too.
 *
 * Then the provider's events are decoded by that deployment's upstream translator into internal
 * chunks and encoded in the client's protocol, as they come (OpenAI in and out: passed through as
 * sent; the bytes themselves are the pump's, stream-pump.ts). The request is settled from the
 * provider's usage (or counted tokens) before the stream's end; a failure once the answer started
 * becomes the protocol's error event, is not retried elsewhere (bytes reached the client) and is
 * not charged. A client that leaves does not end the upstream call: it is drained, within bounds, so
 * what the provider produced is billed (one that leaves while no deployment answered yet ends the
 * chain). A client that stays connected but accepts no bytes for `chat.idleTimeoutSeconds` is cut
 * and treated as one that left.
 */
export async function streamChat(
  deps: ChatDeps,
  sink: ResponseSink,
  inbound: InboundTranslator,
  plan: ChatPlan,
  bill: RequestBill,
  keeper?: AnswerKeeper,
): Promise<void> {
  const upstreamAbort = new AbortController();
  const client = watchClient(sink, deps.drains, upstreamAbort);
  const encoder = inbound.streamEncoder(plan);
  const send = async (text: string) => {
    if (!text || client.gone || sink.destroyed) return;
    if (sink.write(text)) return;
    if ((await sink.waitForClient(deps.idleTimeoutMs)) !== 'stalled') return;
    sink.log.warn(
      { idleTimeoutSeconds: deps.idleTimeoutMs / 1000 },
      'streaming client accepted no bytes; cutting it, the stream is drained and billed as if it had left',
    );
    sink.destroy(); // 'close' follows: the disconnected path drains and bills
  };
  let started = false;
  try {
    if (!deps.streamErrorsAsStatus) {
      startEventStream(sink);
      started = true;
      await send(encoder.opening?.() ?? '');
    }
    const chain = await callDeployments(deps, sink.log, plan, bill.requestId, { signal: upstreamAbort.signal, cancelled: () => client.gone });
    if (!chain.ok) {
      await bill.void(client.gone ? 'client_disconnected' : 'upstream_error');
      const failure = chainFailure(plan, chain);
      if (!started) throw failure;
      await send(encoder.failure(failure.message));
      return;
    }
    const { target: route, value: res } = chain;
    bill.servedBy(route.deployment);
    bill.markUpstreamResponse();
    if (!started) {
      sink.header(DEPLOYMENT_HEADER, route.deployment.id);
      startEventStream(sink);
      started = true;
    }
    await send(deploymentComment(route.deployment.id));
    const pump = new StreamPump(route.upstream.streamDecoder(), encoder, plan, () => bill.markFirstToken());
    bill.trackProduced(() => pump.produced());

    let upstreamError: string | null = null;
    let transportError: unknown;
    // Once the provider said the answer is complete ([DONE], Anthropic's message_stop), the rest of
    // its body is waited for only briefly (its end usually follows at once, and reading it keeps the
    // connection for the next request); a provider that holds the response open, or drops it, after
    // that point cannot turn the delivered answer into a failure.
    let afterDone: NodeJS.Timeout | undefined;
    try {
      for await (const piece of res.body) {
        const out = pump.feed(piece as Buffer);
        if (out) await send(out);
        if (pump.error) break;
        if (pump.sawDone && !afterDone) afterDone = setTimeout(() => res.body.destroy(), AFTER_DONE_MS);
      }
      pump.ended();
      upstreamError = pump.error;
    } catch (err) {
      if (pump.sawDone && !pump.error) pump.ended();
      else if (!(client.gone && upstreamAbort.signal.aborted)) {
        upstreamError = describeTransportError(err);
        transportError = err;
      }
    } finally {
      clearTimeout(afterDone);
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
  } catch (err) {
    // Once the headers are out, no HTTP error can follow them: the stream ends with the protocol's
    // error event, as for a provider failure, rather than silently (which a client reads as an
    // empty answer).
    if (!started) throw err;
    const voided = bill.open;
    sink.log.warn({ err, requestId: bill.requestId }, 'a stream failed inside the gateway; it ends with the error event');
    await bill.voidIfOpen('error');
    await send(encoder.failure(`the gateway failed while streaming (request ${bill.requestId})${voided ? '; nothing was charged' : ''}`));
  } finally {
    client.stop();
    await bill.voidIfOpen('error');
    if (started && !sink.destroyed) sink.end();
  }
}

/** How long the rest of a provider's body is read after it said the answer is complete. */
const AFTER_DONE_MS = 1000;

/** The header that names the serving deployment on a JSON answer (and on a stream under `chat.streamErrorsAsStatus`). */
const DEPLOYMENT_HEADER = 'x-tollgate-deployment';

/**
 * The serving deployment, in a stream whose headers went out before it was known: an SSE comment,
 * which every conforming parser (the openai and Anthropic SDKs, eventsource-parser under the AI SDK,
 * Codex's) skips, so no client sees an event it does not know.
 */
export function deploymentComment(deploymentId: string): string {
  return `: ${DEPLOYMENT_HEADER} ${deploymentId.replace(/[\r\n]/g, '')}\n\n`;
}

function startEventStream(sink: ResponseSink): void {
  sink.startStream({
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
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
