import type { Charge } from './charge.ts';
import type { InternalCompletion, Usage } from './internal.ts';

/**
 * What an inbound translator's encoders read of the chat plan (src/metered/plan/plan.ts, which satisfies
 * it): named here so that protocols/ depends on nothing in chat/.
 */
export interface EncodePlan {
  readonly model: { readonly upstreamName: string };
  /** The client asked for the usage chunk (`stream_options.include_usage`). */
  readonly clientWantsUsage: boolean;
  /** The client speaks the provider's own protocol: answers and events are relayed as sent. */
  readonly native: boolean;
}

/**
 * The inbound side of one protocol clients speak to the gateway (OpenAI chat completions, OpenAI
 * Responses, Anthropic Messages): how its requests become the internal form and how the internal answers,
 * stream events and errors are written back in it. The internal form is OpenAI chat completions,
 * so OpenAI chat's inbound translator is the identity and its answers pass through byte for byte.
 */
export interface InboundTranslator {
  /** The route it is served on (POST). */
  readonly path: string;
  /**
   * Errors on this route follow `errors.format` (spec or OpenAI's shape). False: `errorBody`
   * writes them in the protocol's own shape whatever the format.
   */
  readonly openaiCompatible: boolean;
  /**
   * A header that may carry the API key instead of `Authorization: Bearer` (Anthropic's
   * `x-api-key`), lower case. Absent: only Authorization.
   */
  readonly apiKeyHeader?: string;
  /** The protocol's error body for a refusal; absent: the configured format's. */
  errorBody?(e: { status: number; code: string; message: string; extra: Record<string, unknown> }): Record<string, unknown>;
  /**
   * The client's name for a field of the internal body that a refusal's `param` names (the plan
   * validates the internal body); absent: the names are the same.
   */
  clientParam?(internalParam: string): string;
  /**
   * The request body as the internal (OpenAI chat completions) body; a refusal is thrown as an
   * ApiError. `extraFields`: the fields the model's provider was configured to accept beyond the
   * protocol's own (passed when the model was resolved first, see `native`); `target`: what the
   * translation reads of that model (its reasoning family, its output limit, which a larger
   * max_tokens is lowered to).
   */
  decodeRequest(body: unknown, extraFields?: ReadonlySet<string>, target?: { readonly reasoningFamily: string; readonly maxOutputTokens: number }): unknown;
  /** Response headers a decoded request earns (naming what the decoding accepted and dropped); absent: none. */
  decodedHeaders?(body: unknown): Record<string, string>;
  /**
   * A provider type that speaks this protocol itself: a request for a model it serves is sent there
   * untranslated (plan.native, planned by src/metered/plan/inbound.ts); any other is decoded.
   * `checkRequest` validates the body before its model is resolved. Absent: always decoded.
   */
  readonly native?: { readonly upstream: string; checkRequest(body: unknown): Record<string, unknown> & { model: string } };
  /**
   * The internal chat.completion (as JSON text, and parsed) as this protocol's answer body; for a
   * native plan, `internalJson` is the provider's own answer. `usage` is what was billed, `charge`
   * what the ledger charged for it, written into the answer's usage (src/protocols/charge.ts). (All
   * are always passed by the pipeline; optional so that a translator's unit tests can leave them out.)
   */
  encodeAnswer(internalJson: string, parsed: InternalCompletion, plan?: EncodePlan, usage?: Usage, charge?: Charge): string;
  /** An encoder for one streamed answer. */
  streamEncoder(plan: EncodePlan): StreamEncoder;
}

/** Writes one stream in the protocol's events; every method returns the bytes to send ('' for none). */
export interface StreamEncoder {
  /**
   * The events a stream opens with before any provider answered (the headers go out before the
   * upstream call): Responses' response.created and response.in_progress. Absent: the protocol's
   * first event needs the provider's answer (Anthropic's message_start carries its message id).
   */
  opening?(): string;
  /** An internal chat.completion.chunk (JSON text); `usageOnly`: the final usage chunk, with no choices. */
  chunk(data: string, usageOnly: boolean): string;
  /** A provider event passed through untranslated (a native plan): the bytes to send for it. */
  native?(event: string): string;
  /** The provider failed: the error event that ends the stream (`message` says nothing was charged). */
  failure(message: string): string;
  /**
   * The whole answer as the protocol's JSON object (a Responses stream's final Response), closing
   * what is open; `end` then carries it. Absent: the protocol has no such object.
   */
  finalAnswer?(usage?: Usage, charge?: Charge): string;
  /**
   * The end of a complete (billed) stream; `usage` is what was billed (always passed by the pipeline).
   * `answer`: the object `finalAnswer` gave, as a keeper rewrote it, to be carried instead.
   * `charge`: what the ledger charged, for the final usage; absent when the settle was not applied,
   * and then no charge is claimed.
   */
  end(usage?: Usage, answer?: string, charge?: Charge): string;
}
