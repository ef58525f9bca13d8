import type { IncomingMessage, ServerResponse } from 'node:http';
import { composeAnswer, fakeInputTokens, type Answer, type FakeAnthropicBehaviour } from './fake-anthropic-answer.ts';
import type { ReceivedRequest } from './fake-openai.ts';
import { startFakeServer } from './fake-server.ts';

export type { FakeAnthropicBehaviour } from './fake-anthropic-answer.ts';

/**
 * A stand-in for Anthropic's Messages API on 127.0.0.1, speaking its wire format: POST
 * /v1/messages answers a `message` JSON, or with `stream: true` the SSE events `event: <name>` /
 * `data: <json>` (message_start, ping, content_block_start/delta/stop, message_delta with usage,
 * message_stop); errors are `{"type":"error","error":{"type","message"}}` with Anthropic's status
 * for each type. It misbehaves on request with the same markers as the OpenAI fake (fake-openai.ts),
 * plus an `overloaded_error` event mid-stream.
 */
export interface FakeAnthropic {
  /** The API origin, as Anthropic's SDK takes it for `baseURL` (requests go to `${url}/v1/messages`). */
  url: string;
  received: ReceivedRequest[];
  behaviour: FakeAnthropicBehaviour;
  close(): Promise<void>;
}

export interface FakeAnthropicOptions {
  /** Keep every request in `received` (default). */
  record?: boolean;
  behaviour?: FakeAnthropicBehaviour;
  /** Chooses the behaviour per request. */
  behaviourFor?: (body: any) => FakeAnthropicBehaviour | undefined;
  /** The only `x-api-key` accepted; unset accepts any non-empty key. */
  apiKey?: string;
  /** Context windows by model name: a longer prompt is Anthropic's 400 "prompt is too long", billed nothing. */
  contextLengths?: Record<string, number>;
}

/** Anthropic's error type for each status it answers with. */
const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

export async function startFakeAnthropic(opts: FakeAnthropicOptions = {}): Promise<FakeAnthropic> {
  const fake: FakeAnthropic = { url: '', received: [], behaviour: opts.behaviour ?? {}, close: async () => undefined };
  const server = await startFakeServer((req, res, body) => {
    if (opts.record !== false) fake.received.push({ path: req.url ?? '', headers: req.headers, body });
    void respond({ ...(opts.behaviourFor?.(body) ?? fake.behaviour) }, opts, req, res, body);
  });
  fake.url = server.origin;
  fake.close = server.close;
  return fake;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const randomId = () => Math.random().toString(36).slice(2, 14);

function fail(res: ServerResponse, status: number, message: string, retryAfter?: string): void {
  const type = ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
  res.writeHead(status, { 'content-type': 'application/json', 'request-id': `req_fake${randomId()}`, ...(retryAfter ? { 'retry-after': retryAfter } : {}) });
  res.end(JSON.stringify({ type: 'error', error: { type, message } }));
}

/** The request checks Anthropic makes before any generation, in its order: key, version, body. */
function refusal(opts: FakeAnthropicOptions, req: IncomingMessage, body: any): [number, string] | null {
  const key = req.headers['x-api-key'];
  if (!key || (opts.apiKey !== undefined && key !== opts.apiKey)) return [401, 'invalid x-api-key'];
  if (!req.headers['anthropic-version']) return [400, 'anthropic-version: header is required'];
  // A body that is not JSON arrives as its text.
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [400, 'The request body is not valid JSON.'];
  if (typeof body.model !== 'string') return [400, 'model: Field required'];
  if (!Number.isInteger(body.max_tokens) || body.max_tokens < 1) return [400, 'max_tokens: Field required'];
  if (!Array.isArray(body.messages) || body.messages.length === 0) return [400, 'messages: at least one message is required'];
  // Forced tool use prefills the assistant turn, which thinking cannot precede (Anthropic's own wording).
  if ((body.thinking?.type === 'enabled' || body.thinking?.type === 'adaptive') && ['any', 'tool'].includes(body.tool_choice?.type))
    return [400, 'Thinking may not be enabled when tool_choice forces tool use.'];
  // Sampling beside thinking: Anthropic's extended-thinking docs (sampling parameters) make temperature and
  // top_k incompatible with thinking and allow top_p only from 0.95 to 1; temperature 1 is its default.
  if (body.thinking?.type === 'enabled' || body.thinking?.type === 'adaptive') {
    if (body.temperature !== undefined && body.temperature !== 1) return [400, '`temperature` may only be set to 1 when thinking is enabled.'];
    if (body.top_k !== undefined) return [400, '`top_k` may not be set when thinking is enabled.'];
    if (body.top_p !== undefined && body.top_p < 0.95) return [400, '`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled.'];
  }
  if (body.thinking?.type === 'enabled') {
    // Extended thinking in a tool loop: the assistant turn that called the tools must carry the signed
    // thinking that preceded its calls (Anthropic's own wording below).
    const lastAssistant = [...body.messages].reverse().find((m: any) => m?.role === 'assistant');
    const blocks: any[] = Array.isArray(lastAssistant?.content) ? lastAssistant.content : [];
    if (blocks.some((b) => b?.type === 'tool_use') && !['thinking', 'redacted_thinking'].includes(blocks[0]?.type)) {
      return [
        400,
        'messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.',
      ];
    }
  }
  return null;
}

async function respond(b: FakeAnthropicBehaviour, opts: FakeAnthropicOptions, req: IncomingMessage, res: ServerResponse, body: any): Promise<void> {
  if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/messages') return fail(res, 404, 'Not Found');
  const refused = refusal(opts, req, body);
  if (refused) return fail(res, ...refused);
  if (b.hang) return;
  if (b.delayMs) await sleep(b.delayMs);
  if (b.failStatus) return fail(res, b.failStatus, b.failStatus === 529 ? 'Overloaded' : `injected failure ${b.failStatus}`, b.retryAfter);

  const id = `msg_fake${randomId()}`;
  const answer = composeAnswer(b, body);
  const window = opts.contextLengths?.[body.model];
  // Judged on the prompt as sent; an injected `usage` is a provider lying about its bill.
  const prompt = fakeInputTokens(body, b.partTokens ?? 0);
  if (window !== undefined && prompt > window) return fail(res, 400, `prompt is too long: ${prompt} tokens > ${window} maximum`);

  if (body.stream === true) return stream(b, res, id, body.model, answer);
  const message: Record<string, unknown> = {
    id,
    type: 'message',
    role: 'assistant',
    model: body.model,
    content: answer.content,
    stop_reason: answer.stop_reason,
    stop_sequence: answer.stop_sequence,
  };
  if (!b.omitUsage) message.usage = { ...answer.usage, service_tier: 'standard' };
  const text = JSON.stringify(message);
  res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_fake${randomId()}` }).end(b.rewriteAnswer ? b.rewriteAnswer(text) : text);
}

async function stream(b: FakeAnthropicBehaviour, res: ServerResponse, id: string, model: string, answer: Answer): Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'request-id': `req_fake${randomId()}`,
  });
  const send = async (event: Record<string, unknown> & { type: string }) => {
    if (res.destroyed) return;
    const json = b.spacedJson ? JSON.stringify(event, null, 1).replace(/\n */g, ' ') : JSON.stringify(event);
    res.write(`event: ${event.type}\ndata: ${b.rewriteAnswer ? b.rewriteAnswer(json) : json}\n\n`);
    if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
  };
  const usage = b.omitUsage ? {} : { usage: answer.usage };

  // message_start reports the input side in full and output as it stands (Anthropic sends 1 here).
  await send({
    type: 'message_start',
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      ...(b.omitUsage ? {} : { usage: { ...answer.usage, output_tokens: 1 } }),
    },
  });
  await send({ type: 'ping' });
  let textDeltas = 0;
  for (const [index, block] of answer.content.entries()) {
    if (block.type === 'text') {
      await send({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } });
      for (const word of block.text.split(/(?<= )/)) {
        if (b.cutAfterChunks !== undefined && textDeltas >= b.cutAfterChunks) {
          // Let what was written reach the client first, then drop the connection.
          await sleep(20);
          res.destroy();
          return;
        }
        if (b.overloadAfterChunks !== undefined && textDeltas >= b.overloadAfterChunks) {
          await send({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
          res.end();
          return;
        }
        await send({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: word } });
        textDeltas++;
      }
    } else if (block.type === 'thinking') {
      await send({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '' } });
      for (const word of block.thinking.split(/(?<= )/)) await send({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: word } });
      await send({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: block.signature } });
    } else {
      await send({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
      const json = JSON.stringify(block.input);
      for (let i = 0; i < json.length; i += 8)
        await send({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: json.slice(i, i + 8) } });
    }
    await send({ type: 'content_block_stop', index });
  }
  await send({ type: 'message_delta', delta: { stop_reason: answer.stop_reason, stop_sequence: answer.stop_sequence }, ...usage });
  await send({ type: 'message_stop' });
  res.end();
}
