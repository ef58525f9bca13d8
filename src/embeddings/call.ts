import type { ProviderAdapter } from '../providers/adapter.ts';
import type { Deployment } from '../providers/catalog.ts';
import type { AttemptOutcome } from '../routing/attempts.ts';
import { statusFailure, transportFailure } from '../routing/classify.ts';
import type { ApiError } from '../refusal.ts';
import { describeTransportError, upstreamFailure, wholeAnswerTimeoutFailure } from '../metered/upstream-error.ts';
import { decodeEmbeddings, type DecodedEmbeddings } from './answer.ts';
import type { EmbeddingsPlan } from './plan.ts';
import { MAX_ANSWER_BYTES } from './limits.ts';
import { readAnswer, type OversizeAnswer } from './oversize.ts';

/** Why one provider call for embeddings failed: what the client is told, and what the provider did. */
export interface EmbeddingsCallFailure {
  /** The 502 for the client, with the provider's own message (credentials cut out) and its Retry-After. */
  error: ApiError;
  /** The provider's HTTP status and headers, when it answered (a retry or fallback decides on them). */
  status?: number;
  headers?: Record<string, string | string[] | undefined>;
  /** The provider's error body, when it answered with one (some say the request itself was refused: src/routing/). */
  body?: string;
  /** The transport error, when it did not answer. */
  transportError?: unknown;
}

/**
 * What a provider's 2xx gave: the vectors, or an answer too large to read whole, which the provider
 * billed all the same (src/embeddings/oversize.ts), so the caller charges it and tells the client.
 */
export type EmbeddingsAnswer = { vectors: DecodedEmbeddings } | { oversize: OversizeAnswer };

export type EmbeddingsCall = { ok: true; answer: EmbeddingsAnswer } | { ok: false; failure: EmbeddingsCallFailure };

/**
 * One call to one provider's /embeddings (the only place embeddings touch a provider): the decoded
 * answer, or a failure carrying the status and headers. It never throws and never touches money,
 * so a caller may try it again, or on another deployment (`upstreamName`: that deployment's name
 * for the model), before it settles or voids the bill.
 */
export async function callEmbeddings(
  adapter: ProviderAdapter,
  plan: EmbeddingsPlan,
  requestId: string,
  upstreamName = plan.model.upstreamName,
  signal?: AbortSignal,
): Promise<EmbeddingsCall> {
  if (!adapter.embeddings) return { ok: false, failure: { error: upstreamFailure(`provider ${adapter.name} serves no embeddings`) } };
  let status: number | undefined;
  let headers: EmbeddingsCallFailure['headers'];
  try {
    // No abort on client disconnect, as for chat: the provider bills the call either way, so it is
    // awaited and charged. Only a cut aborts it (src/metered/run.ts, RunOptions).
    const res = await adapter.embeddings(JSON.stringify({ model: upstreamName, ...plan.upstreamBody }), requestId, signal);
    status = res.statusCode;
    headers = res.headers;
    const succeeded = status >= 200 && status < 300;
    const read = await readAnswer(res.body, succeeded);
    if ('oversize' in read) {
      if (succeeded) return { ok: true, answer: { oversize: read.oversize } };
      const error = upstreamFailure(`the provider answered ${status} with an error over ${MAX_ANSWER_BYTES} bytes`);
      return { ok: false, failure: { error, status, headers } };
    }
    if (!succeeded) {
      const error = upstreamFailure(`the provider answered ${status}`, read.text, { status, headers });
      return { ok: false, failure: { error, status, headers, body: read.text } };
    }
    const decoded = decodeEmbeddings(read.text, plan.inputs.length);
    if (!decoded.ok) return { ok: false, failure: { error: upstreamFailure(decoded.problem), status, headers } };
    return { ok: true, answer: { vectors: decoded.value } };
  } catch (err) {
    const error =
      wholeAnswerTimeoutFailure(err, 'an embeddings answer comes only once every input is embedded: send fewer or shorter inputs per request') ??
      upstreamFailure(describeTransportError(err));
    return { ok: false, failure: { error, status, headers, transportError: err } };
  }
}

/**
 * `callEmbeddings` as one attempt of the deployment chain (src/metered/deployment-call.ts): a provider
 * that answered 2xx and then broke off or sent nonsense may have billed us, so that ends the chain
 * (as for chat); a failure before an answer retries or moves on by its status or transport error.
 */
export async function embeddingsAttempt(
  adapter: ProviderAdapter,
  plan: EmbeddingsPlan,
  requestId: string,
  deployment: Deployment,
  signal?: AbortSignal,
): Promise<AttemptOutcome<EmbeddingsAnswer, ApiError>> {
  const called = await callEmbeddings(adapter, plan, requestId, deployment.upstreamName, signal);
  if (called.ok) return { ok: true, value: called.answer };
  const { error, status, headers, transportError, body } = called.failure;
  if (status === undefined && transportError === undefined) return { ok: false, action: 'next', error };
  if (status === undefined) return transportFailure(transportError, 'whole', error);
  if (status >= 200 && status < 300) return { ok: false, action: 'stop', status, error };
  return statusFailure(status, headers, error, body);
}
