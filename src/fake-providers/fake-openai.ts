import type { IncomingMessage, ServerResponse } from 'node:http';
import { startFakeServer } from './fake-server.ts';
import { respondEmbeddings, type EmbeddingsBehaviour } from './fake-openai-embeddings.ts';
import { fakeTokens } from './fake-tokens.ts';

/**
 * A stand-in for a paid OpenAI-compatible provider, on 127.0.0.1. It answers in OpenAI's wire format
 * (chat.completion JSON; SSE chunks with a role chunk, content or tool-call deltas, a finish chunk,
 * the usage chunk when asked, then `data: [DONE]`; embeddings from fake-openai-embeddings.ts) and can
 * be told to misbehave (the failure modes apply to both endpoints). Shared by the tests,
 * `tollgate demo` and the benchmark.
 */
export interface FakeBehaviour extends Pick<EmbeddingsBehaviour, 'nativeDimensions'> {
  /** Text of the answer, sent one word per chunk when streaming. */
  content?: string;
  /** Reasoning sent before the answer as `reasoning_content` (DeepSeek, vLLM's reasoning parsers), billed as completion tokens. */
  reasoning?: string;
  /** Stream events serialised with spaces after `:` and `,`, as Python's json.dumps writes them. */
  spacedJson?: boolean;
  /** Answer with a tool call instead of text. */
  toolCall?: { name: string; arguments: string };
  /** Overrides the usage the provider reports (embeddings read only prompt_tokens). */
  usage?: { prompt_tokens: number; completion_tokens: number; reasoning_tokens?: number; cached_tokens?: number };
  /** Leave usage out entirely (JSON and stream). */
  omitUsage?: boolean;
  /** More fields in the usage object (OpenRouter's `cost`, or a provider claiming a charge of its own). */
  usageExtra?: Record<string, unknown>;
  /** Wait before the response starts. */
  delayMs?: number;
  /** Wait before the response starts, chosen per request (a provider whose time to answer depends on the request). */
  delayMsFor?: (body: any) => number;
  /** Wait between stream chunks. */
  chunkDelayMs?: number;
  /** An answer that is not streamed is sent in four pieces, this long apart (a provider trickling its body). */
  answerPieceDelayMs?: number;
  /** Fail with this HTTP status and an OpenAI error body. */
  failStatus?: number;
  /** With failStatus: a Retry-After header (OpenAI sends one with 429). */
  retryAfter?: string;
  /** With failStatus: this error body instead of the generic one (a provider's exact refusal). */
  failBody?: unknown;
  /** Accept the connection and never answer. */
  hang?: boolean;
  /** Read the request, then drop the connection without answering (a provider or proxy reset). */
  dropConnection?: boolean;
  /** Destroy the connection after this many content chunks. */
  cutAfterChunks?: number;
  /** Bill each non-text content part (image, audio, file) at this many prompt tokens instead of its text. */
  partTokens?: number;
  /** A provider that writes its own bytes: rewrites the JSON answer's text before it is sent. */
  rewriteAnswer?: (json: string) => string;
  /** Rewrites each stream chunk's JSON text before it is sent. */
  rewriteChunk?: (json: string) => string;
}

export interface ReceivedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export interface FakeOpenAI {
  url: string;
  received: ReceivedRequest[];
  behaviour: FakeBehaviour;
  close(): Promise<void>;
}

const DEFAULT_CONTENT = 'Hello from the fake provider, a stand-in for a paid model.';

export interface FakeOptions {
  /** Keep every request in `received` (default). The benchmark turns it off to keep memory flat. */
  record?: boolean;
  behaviour?: FakeBehaviour;
  /** Chooses the behaviour per request (the benchmark picks the pace by model name). */
  behaviourFor?: (body: any) => FakeBehaviour | undefined;
  /**
   * Context windows by upstream model name. A prompt longer than its model's window is refused with
   * OpenAI's 400 `context_length_exceeded` and billed nothing, as real providers do; the gateway's
   * reservation relies on that refusal when it caps its prompt bound at the context length.
   */
  contextLengths?: Record<string, number>;
}

export async function startFakeOpenAI(opts: FakeOptions = {}): Promise<FakeOpenAI> {
  const fake: FakeOpenAI = {
    url: '',
    received: [],
    behaviour: opts.behaviour ?? {},
    close: async () => undefined,
  };
  const server = await startFakeServer((req, res, body) => {
    if (opts.record !== false) fake.received.push({ path: req.url ?? '', headers: req.headers, body });
    void respond(fake, { ...(opts.behaviourFor?.(body) ?? fake.behaviour) }, req, res, body, opts.contextLengths);
  });
  fake.url = `${server.origin}/v1`;
  fake.close = server.close;
  return fake;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export { fakeTokens };

/** Fields a real provider renders into the prompt and bills as input, besides the messages. */
const BILLED_INPUTS = ['tools', 'tool_choice', 'functions', 'function_call', 'response_format'];

/**
 * Prompt tokens as a provider bills them: the messages and every schema-like field (tool and
 * function definitions, response_format's JSON schema), with non-text parts at a fixed price.
 */
export function fakePromptTokens(body: any, partTokens: number): number {
  let parts = 0;
  const messages = (Array.isArray(body.messages) ? body.messages : []).map((m: any) => {
    if (!Array.isArray(m?.content)) return m;
    const content = m.content.filter((p: any) => p?.type === 'text' || p?.type === 'refusal');
    parts += m.content.length - content.length;
    return { ...m, content };
  });
  const inputs = BILLED_INPUTS.filter((k) => body[k] !== undefined).map((k) => JSON.stringify(body[k]));
  return fakeTokens(JSON.stringify(messages) + inputs.join('')) + parts * partTokens;
}

async function respond(
  _fake: FakeOpenAI,
  b: FakeBehaviour,
  req: IncomingMessage,
  res: ServerResponse,
  body: any,
  contextLengths?: Record<string, number>,
): Promise<void> {
  const embeddings = req.url?.endsWith('/embeddings') ?? false;
  if (req.method !== 'POST' || !(embeddings || req.url?.endsWith('/chat/completions'))) {
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }));
    return;
  }
  if (b.hang) return;
  if (b.dropConnection) {
    res.destroy();
    return;
  }
  if (b.delayMs) await sleep(b.delayMs);
  if (b.delayMsFor) await sleep(b.delayMsFor(body));
  if (b.failStatus) {
    res.writeHead(b.failStatus, { 'content-type': 'application/json', ...(b.retryAfter ? { 'retry-after': b.retryAfter } : {}) });
    res.end(JSON.stringify(b.failBody ?? { error: { message: `injected failure ${b.failStatus}`, type: 'server_error', param: null, code: null } }));
    return;
  }

  if (embeddings) return respondEmbeddings(b, body, res, contextLengths);

  const window = contextLengths?.[body.model];
  const promptTokens = fakePromptTokens(body, b.partTokens ?? 0);
  // The refusal looks at the prompt as sent; an injected `usage` is a provider lying about its bill.
  if (window !== undefined && promptTokens > window) {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        error: {
          message: `This model's maximum context length is ${window} tokens. However, your messages resulted in ${promptTokens} tokens.`,
          type: 'invalid_request_error',
          param: 'messages',
          code: 'context_length_exceeded',
        },
      }),
    );
    return;
  }

  const id = `chatcmpl-fake${Math.random().toString(36).slice(2, 12)}`;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model;
  const content = b.content ?? DEFAULT_CONTENT;
  const n = typeof body.n === 'number' ? body.n : 1;
  // A real provider stops each choice at the request's limit (finish_reason "length") and bills no
  // more than it; a fake that billed past it would be a lying provider in every test.
  const limit = Number(body.max_completion_tokens ?? body.max_tokens);
  const reasoningTokens = b.reasoning ? fakeTokens(b.reasoning) : 0;
  const produced = (b.toolCall ? fakeTokens(b.toolCall.arguments) + 5 : fakeTokens(content)) + reasoningTokens;
  const completionTokens = Number.isInteger(limit) && limit > 0 ? Math.min(produced, limit) : produced;
  const usage = {
    prompt_tokens: b.usage?.prompt_tokens ?? promptTokens,
    completion_tokens: b.usage?.completion_tokens ?? completionTokens * n,
    total_tokens: 0,
    prompt_tokens_details: { cached_tokens: b.usage?.cached_tokens ?? 0, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: b.usage?.reasoning_tokens ?? reasoningTokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
    ...b.usageExtra,
  };
  usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;

  if (!body.stream) {
    const choices = Array.from({ length: n }, (_, index) => ({
      index,
      message: b.toolCall
        ? { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake1', type: 'function', function: b.toolCall }], refusal: null, annotations: [] }
        : { role: 'assistant', content, refusal: null, annotations: [], ...(b.reasoning ? { reasoning_content: b.reasoning } : {}) },
      logprobs: null,
      finish_reason: b.toolCall ? 'tool_calls' : 'stop',
    }));
    const payload: Record<string, unknown> = { id, object: 'chat.completion', created, model, choices, service_tier: 'default', system_fingerprint: 'fp_fake' };
    if (!b.omitUsage) payload.usage = usage;
    const text = JSON.stringify(payload);
    const answer = b.rewriteAnswer ? b.rewriteAnswer(text) : text;
    res.writeHead(200, { 'content-type': 'application/json' });
    if (!b.answerPieceDelayMs) return void res.end(answer);
    const piece = Math.ceil(answer.length / 4);
    for (let at = 0; at < answer.length && !res.destroyed; at += piece) {
      if (at) await sleep(b.answerPieceDelayMs);
      res.write(answer.slice(at, at + piece));
    }
    res.end();
    return;
  }

  const includeUsage = body.stream_options?.include_usage === true && !b.omitUsage;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => {
    const obj: Record<string, unknown> = {
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      service_tier: 'default',
      system_fingerprint: 'fp_fake',
      choices,
      ...extra,
    };
    if (includeUsage && !('usage' in extra)) obj.usage = null;
    // Indented, then folded onto one line: only structural whitespace is touched (strings escape \n).
    const json = b.spacedJson ? JSON.stringify(obj, null, 1).replace(/\n */g, ' ') : JSON.stringify(obj);
    return `data: ${b.rewriteChunk ? b.rewriteChunk(json) : json}\n\n`;
  };
  const write = async (text: string) => {
    if (res.destroyed) return;
    res.write(text);
    if (b.chunkDelayMs) await sleep(b.chunkDelayMs);
  };

  for (let index = 0; index < n; index++) {
    if (b.toolCall) {
      await write(
        chunk([
          {
            index,
            delta: {
              role: 'assistant',
              content: null,
              tool_calls: [{ index: 0, id: 'call_fake1', type: 'function', function: { name: b.toolCall.name, arguments: '' } }],
              refusal: null,
            },
            logprobs: null,
            finish_reason: null,
          },
        ]),
      );
      const args = b.toolCall.arguments;
      for (let i = 0; i < args.length; i += 8) {
        await write(
          chunk([{ index, delta: { tool_calls: [{ index: 0, function: { arguments: args.slice(i, i + 8) } }] }, logprobs: null, finish_reason: null }]),
        );
      }
      await write(chunk([{ index, delta: {}, logprobs: null, finish_reason: 'tool_calls' }]));
      continue;
    }
    await write(chunk([{ index, delta: { role: 'assistant', content: '', refusal: null }, logprobs: null, finish_reason: null }]));
    for (const word of b.reasoning ? b.reasoning.split(/(?<= )/) : []) {
      await write(chunk([{ index, delta: { reasoning_content: word }, logprobs: null, finish_reason: null }]));
    }
    const words = content.split(/(?<= )/);
    for (const [i, word] of words.entries()) {
      if (b.cutAfterChunks !== undefined && i >= b.cutAfterChunks) {
        // Let what was written reach the client first, then drop the connection.
        await sleep(20);
        res.destroy();
        return;
      }
      await write(chunk([{ index, delta: { content: word }, logprobs: null, finish_reason: null }]));
    }
    await write(chunk([{ index, delta: {}, logprobs: null, finish_reason: 'stop' }]));
  }
  if (includeUsage) await write(chunk([], { usage }));
  await write('data: [DONE]\n\n');
  res.end();
}
