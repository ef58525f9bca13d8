import type { FastifyReply } from 'fastify';
import { createParser } from 'eventsource-parser';
import { parseJsonLoosely } from '../json.ts';
import type { ProviderAdapter } from '../providers/adapter.ts';
import type { Services } from '../services.ts';
import type { RequestBill } from './bill.ts';
import type { ChatPlan } from './plan.ts';
import { waitForClient } from './client-drain.ts';
import { describeTransportError, providerMessage } from './upstream-error.ts';
import { logProviderFailure } from './provider-failure-log.ts';
import { StreamedText } from './streamed-text.ts';
import { estimateUsage, readUsage, type Usage } from './usage.ts';

/** How many disconnected streams are being drained right now, across this process. */
let activeDrains = 0;

const DONE = 'data: [DONE]\n\n';
/**
 * An event carrying a usage object (not `"usage": null`), compact or spaced as Python's json.dumps
 * writes it. Generated text cannot match: its quotes are escaped (`\"usage\"`).
 */
const USAGE_OBJECT = /"usage"\s*:\s*\{/;

/**
 * Streaming: 200 and the SSE headers go out first, then the provider's events are passed through
 * as they come. Only events that carry usage are parsed on the way. The request is settled from the
 * provider's usage (or counted tokens) before the final `[DONE]`; an upstream failure becomes an
 * error event and is not charged. A client that leaves does not end the upstream call: it is
 * drained, within bounds, so what the provider produced is billed. A client that stays connected
 * but accepts no bytes for `chat.idleTimeoutSeconds` is cut and treated as one that left.
 */
export async function streamChat(services: Services, reply: FastifyReply, plan: ChatPlan, adapter: ProviderAdapter, bill: RequestBill): Promise<void> {
  const cfg = services.config.chat;
  const raw = reply.raw;
  reply.hijack();
  raw.writeHead(200, {
    ...(reply.getHeaders() as Record<string, string>),
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  raw.flushHeaders();

  let clientGone = false;
  const upstreamAbort = new AbortController();
  let drainTimer: NodeJS.Timeout | undefined;
  let draining = false;
  const onClientClose = () => {
    if (raw.writableFinished) return;
    clientGone = true;
    if (activeDrains >= cfg.maxConcurrentDrains) {
      upstreamAbort.abort();
      return;
    }
    activeDrains++;
    draining = true;
    drainTimer = setTimeout(() => upstreamAbort.abort(), cfg.drainTimeoutSeconds * 1000);
  };
  raw.on('close', onClientClose);

  const send = async (text: string) => {
    if (clientGone || raw.destroyed) return;
    if (raw.write(text)) return;
    if ((await waitForClient(raw, cfg.idleTimeoutSeconds * 1000)) !== 'stalled') return;
    reply.log.warn({ idleTimeoutSeconds: cfg.idleTimeoutSeconds }, 'streaming client accepted no bytes; cutting it, the stream is drained and billed as if it had left');
    raw.destroy(); // 'close' follows: the disconnected path drains and bills
  };

  let usage: Usage | null = null;
  let sawDone = false;
  let upstreamError: string | null = null;
  let upstreamStatus: number | undefined;
  let transportError: unknown;
  const streamedText = new StreamedText();
  // What was produced so far, priced if the request ends here: the provider's own figures once it
  // sent them, otherwise the tokens counted from what it streamed.
  const usageSoFar = async (): Promise<Usage> => usage ?? (await estimateUsage(plan, streamedText.text()));
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
            const data = event.data;
            if (data === '[DONE]') {
              sawDone = true;
              return;
            }
            if (data.includes('"error"') && isErrorEvent(data)) {
              upstreamError = `the provider reported an error${providerMessage(data)}`;
              return;
            }
            if (USAGE_OBJECT.test(data)) {
              const chunk = parseJsonLoosely(data);
              const found = readUsage(chunk?.usage);
              if (found) usage = found;
              // The usage-only chunk (no choices) reaches the client only if it asked for it.
              if (Array.isArray(chunk?.choices) && chunk.choices.length === 0 && !plan.clientWantsUsage) return;
            } else {
              bill.markFirstToken();
              streamedText.add(data);
            }
            pending.push(`data: ${data}\n\n`);
          },
        });
        const decoder = new TextDecoder();
        for await (const piece of res.body) {
          parser.feed(decoder.decode(piece as Buffer, { stream: true }));
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
      logProviderFailure(reply.log, plan, bill.requestId, { status: upstreamStatus, error: transportError, detail: upstreamError });
      await bill.void('upstream_error');
      await send(`data: ${JSON.stringify({ error: { message: `${upstreamError}; nothing was charged`, type: 'upstream_error' } })}\n\n${DONE}`);
      return;
    }
    // Complete, or cut short by our own drain bound after the client left: bill what was produced.
    await bill.settle(await usageSoFar(), clientGone ? 'client_disconnected' : 'ok');
    await send(DONE);
  } finally {
    if (drainTimer) clearTimeout(drainTimer);
    if (draining) activeDrains--;
    raw.off('close', onClientClose);
    await bill.voidIfOpen('error');
    if (!raw.destroyed) raw.end();
  }
}

function isErrorEvent(data: string): boolean {
  const o = parseJsonLoosely(data);
  return !!o && typeof o === 'object' && 'error' in o && !('choices' in o);
}
