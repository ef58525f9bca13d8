import type { ProviderAdapter } from '../providers/adapter.ts';
import type { Deployment } from '../providers/catalog.ts';
import type { AttemptOutcome } from '../routing/attempts.ts';
import { statusFailure, transportFailure } from '../routing/classify.ts';
import type { ApiError } from '../refusal.ts';
import { describeTransportError, upstreamFailure, wholeAnswerTimeoutFailure } from '../chat/upstream-error.ts';
import { decodeEmbeddings, type DecodedEmbeddings } from './answer.ts';
import type { EmbeddingsPlan } from './plan.ts';
import { MAX_ANSWER_BYTES } from './limits.ts';
import type { Dispatcher } from 'undici';

/** Why one provider call for embeddings failed: what the client is told, and what the provider did. */
export interface EmbeddingsCallFailure {
  /** The 502 for the client, with the provider's own message (credentials cut out) and its Retry-After. */
  error: ApiError;
  /** The provider's HTTP status and headers, when it answered (a retry or fallback decides on them). */
  status?: number;
  headers?: Record<string, string | string[] | undefined>;
  /** The transport error, when it did not answer. */
  transportError?: unknown;
}

export type EmbeddingsCall = { ok: true; answer: DecodedEmbeddings } | { ok: false; failure: EmbeddingsCallFailure };

/**
 * One call to one provider's /embeddings (the only place embeddings touch a provider): the decoded
 * answer, or a failure carrying the status and headers. It never throws and never touches money,
 * so a caller may try it again, or on another deployment (`upstreamName`: that deployment's name
 * for the model), before it settles or voids the bill.
 */
export async function callEmbeddings(adapter: ProviderAdapter, plan: EmbeddingsPlan, requestId: string, upstreamName = plan.model.upstreamName): Promise<EmbeddingsCall> {
  if (!adapter.embeddings) return { ok: false, failure: { error: upstreamFailure(`provider ${adapter.name} serves no embeddings`) } };
  let status: number | undefined;
  let headers: EmbeddingsCallFailure['headers'];
  try {
    // No abort on client disconnect, as for chat: the provider bills the call either way, so it is awaited and charged.
    const res = await adapter.embeddings(JSON.stringify({ model: upstreamName, ...plan.upstreamBody }), requestId);
    status = res.statusCode;
    headers = res.headers;
    const text = await readCapped(res.body, MAX_ANSWER_BYTES);
    if (text === null) {
      const problem = `the provider's embeddings answer was over the ${MAX_ANSWER_BYTES} bytes the gateway reads; send fewer inputs, or fewer dimensions`;
      return { ok: false, failure: { error: upstreamFailure(problem), status, headers } };
    }
    if (status < 200 || status >= 300) return { ok: false, failure: { error: upstreamFailure(`the provider answered ${status}`, text, { status, headers }), status, headers } };
    const decoded = decodeEmbeddings(text, plan.inputs.length);
    if (!decoded.ok) return { ok: false, failure: { error: upstreamFailure(decoded.problem), status, headers } };
    return { ok: true, answer: decoded.value };
  } catch (err) {
    const error = wholeAnswerTimeoutFailure(err, 'an embeddings answer comes only once every input is embedded: send fewer or shorter inputs per request') ?? upstreamFailure(describeTransportError(err));
    return { ok: false, failure: { error, status, headers, transportError: err } };
  }
}

/**
 * The body as text, or null past `maxBytes` (the rest is not read: the connection is dropped). A
 * Content-Length is not trusted alone: the bytes are counted as they come.
 */
async function readCapped(body: Dispatcher.ResponseData['body'], maxBytes: number): Promise<string | null> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body) {
    bytes += (chunk as Buffer).length;
    if (bytes > maxBytes) {
      body.destroy();
      return null;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks, bytes).toString('utf8');
}

/**
 * `callEmbeddings` as one attempt of the deployment chain (src/chat/deployment-call.ts): a provider
 * that answered 2xx and then broke off or sent nonsense may have billed us, so that ends the chain
 * (as for chat); a failure before an answer retries or moves on by its status or transport error.
 */
export async function embeddingsAttempt(adapter: ProviderAdapter, plan: EmbeddingsPlan, requestId: string, deployment: Deployment): Promise<AttemptOutcome<DecodedEmbeddings, ApiError>> {
  const called = await callEmbeddings(adapter, plan, requestId, deployment.upstreamName);
  if (called.ok) return { ok: true, value: called.answer };
  const { error, status, headers, transportError } = called.failure;
  if (status === undefined && transportError === undefined) return { ok: false, action: 'next', error };
  if (status === undefined) return transportFailure(transportError, 'whole', error);
  if (status >= 200 && status < 300) return { ok: false, action: 'stop', status, error };
  return statusFailure(status, headers, error);
}
