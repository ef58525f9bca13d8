import type { Config } from '../../config/load.ts';
import type { Catalog } from '../../providers/catalog.ts';
import type { ChatPlan } from '../plan.ts';
import type { Usage } from '../usage.ts';

/**
 * One protocol clients speak to the gateway (OpenAI chat completions, later Anthropic Messages,
 * OpenAI Responses): how its requests become the internal form and how the internal answers,
 * stream events and errors are written back in it. The internal form is OpenAI chat completions,
 * so the OpenAI codec is the identity and its answers pass through byte for byte.
 */
export interface InboundCodec {
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
  /** The request body as the internal (OpenAI chat completions) body; a refusal is thrown as an ApiError. */
  decodeRequest(body: unknown): unknown;
  /**
   * Plans the request itself instead of `planChat(decodeRequest(body))`: a protocol that some
   * provider type speaks natively sends it there untranslated (plan.native). Absent: always decoded.
   */
  plan?(body: unknown, catalog: Catalog, config: Pick<Config, 'chat'>): ChatPlan;
  /**
   * The internal chat.completion (as JSON text, and parsed) as this protocol's answer body; for a
   * native plan, `internalJson` is the provider's own answer. `usage` is what was billed. (Both
   * are always passed by the pipeline; optional so that a codec's unit tests can leave them out.)
   */
  encodeAnswer(internalJson: string, parsed: any, plan?: ChatPlan, usage?: Usage): string;
  /** An encoder for one streamed answer. */
  streamEncoder(plan: ChatPlan): StreamEncoder;
}

/** Writes one stream in the protocol's events; every method returns the bytes to send ('' for none). */
export interface StreamEncoder {
  /** An internal chat.completion.chunk (JSON text); `usageOnly`: the final usage chunk, with no choices. */
  chunk(data: string, usageOnly: boolean): string;
  /** A provider event passed through untranslated (a native plan): the bytes to send for it. */
  native?(event: string): string;
  /** The provider failed: the error event that ends the stream (`message` says nothing was charged). */
  failure(message: string): string;
  /** The end of a complete (billed) stream; `usage` is what was billed (always passed by the pipeline). */
  end(usage?: Usage): string;
}
