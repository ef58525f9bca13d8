import type { CatalogModel, Deployment } from '../../providers/catalog.ts';
import { upstreamOf } from '../../providers/registry.ts';
import type { UpstreamTranslator } from '../../protocols/upstream.ts';
import { badRequest } from '../../refusal.ts';
import { promptBound, type NonTextParts } from '../prompt-bound.ts';

/** The request as one deployment would get it: encoded by its provider type's translator, and bounded. */
export interface DeploymentPlan {
  deployment: Deployment;
  /**
   * What is sent to this deployment, byte for byte: its JSON as UTF-8. Kept as bytes, not as a string:
   * the plan lives as long as the request, and the HTTP client keeps the body it sends until the answer
   * ends, so bytes are held once for a whole stream, where a string would be held beside the client's copy.
   */
  upstreamBytes: Buffer;
  /** Decodes this deployment's answer and events. */
  upstream: UpstreamTranslator;
  /** The prompt tokens this deployment can bill for these bytes (its own encoding, its hidden prompts). */
  promptUpperBound: number;
}

/** A deployment that cannot take the request, and why (logged when the request runs). */
export interface SkippedDeployment {
  deployment: Deployment;
  reason: string;
}

export interface DeploymentPlans {
  routes: DeploymentPlan[];
  skipped: SkippedDeployment[];
}

/**
 * The internal request encoded once per deployment of the model, each by its own provider type's
 * upstream translator (so an OpenAI-compatible model can fall back on Anthropic and the reverse),
 * with its own model name. A deployment whose translator refuses the request is skipped; when every
 * one refuses, the first refusal is the client's 400, naming its field, before anything is reserved.
 * Messages and tools are counted on the internal body, which has at least as many as any encoding
 * of it (Anthropic merges turns); each bound is on the very bytes that deployment would be sent.
 */
export function encodeForDeployments(upstreamBody: Record<string, unknown>, model: CatalogModel, parts: NonTextParts): DeploymentPlans {
  const routes: DeploymentPlan[] = [];
  const skipped: SkippedDeployment[] = [];
  let firstRefusal: { message: string; field?: string } | null = null;
  for (const deployment of model.deployments) {
    const upstream = upstreamOf(deployment.upstream);
    const encoded = upstream.encodeRequest({ ...upstreamBody, model: deployment.upstreamName });
    if (!encoded.ok) {
      firstRefusal ??= encoded;
      skipped.push({ deployment, reason: encoded.message });
      continue;
    }
    // Serialised once: the bound measures the very bytes the adapter sends.
    const upstreamJson = JSON.stringify(encoded.value);
    const sentParts = upstream.nonTextBytes ? { ...parts, bytes: upstream.nonTextBytes(encoded.value) } : parts;
    // Plus what the provider adds unseen (Anthropic's tool system prompt), still capped at the
    // context window, which the provider's own additions count against too.
    const hidden = upstream.hiddenPromptTokens?.(encoded.value) ?? 0;
    const promptUpperBound = Math.min(promptBound(upstreamBody, upstreamJson, model, sentParts) + hidden, model.contextLength);
    routes.push({ deployment, upstreamBytes: Buffer.from(upstreamJson), upstream, promptUpperBound });
  }
  if (!routes.length) throw badRequest(firstRefusal!.message, { param: firstRefusal!.field });
  return { routes, skipped };
}

/** The largest bound among the deployments that can take the request: the reservation holds whichever serves. */
export const largestBound = (routes: readonly DeploymentPlan[]): number => Math.max(...routes.map((r) => r.promptUpperBound));
