import type { Config } from './config/schema.ts';
import { providersMissingKeys, type MissingProviderKey } from './providers/provider-keys.ts';
import { redactDatabaseUrl } from './storage/redact-url.ts';
import { v1Exclusions } from './payments/x402-v1.ts';
import { startupWarnings, type StartupWarning } from './startup-warnings.ts';

/**
 * What an operator needs to see once, at start: what is served, what cannot work yet and why.
 * Logged as one info line by `tollgate serve`, plus one warn line when a provider has no key.
 */
export interface StartupSummary {
  url: string;
  config: string;
  database: string;
  /** Model ids per provider, as /v1/models lists them. */
  models: Record<string, string[]>;
  /** Providers whose key variable is unset: their chats are refused until it is set. */
  providersWithoutKey: MissingProviderKey[];
  topups: string;
  /** With topup.x402v1Body: the offers the x402 v1 body leaves out, and why (logged as a warning). */
  x402v1BodyOmits: { network: string; asset: string; name: string; reason: string }[];
  metrics: string;
  /** Configurations that start but cannot work as they look (src/startup-warnings.ts), each logged as a warning. */
  warnings: StartupWarning[];
}

export function startupSummary(config: Config, server: { url: string; metricsUrl: string | null }): StartupSummary {
  const models: Record<string, string[]> = {};
  for (const m of config.models) (models[m.provider] ??= []).push(`${m.provider}/${m.name}`);
  return {
    url: server.url,
    config: config.source ?? '(none found: built-in defaults)',
    database: redactDatabaseUrl(config.database.url),
    models,
    providersWithoutKey: providersMissingKeys(config),
    topups: topupsState(config),
    x402v1BodyOmits: config.topup.x402v1Body ? v1Exclusions(config.topup.offers) : [],
    metrics: metricsState(config, server),
    warnings: startupWarnings(config),
  };
}

function topupsState(config: Config): string {
  const { offers, facilitator } = config.topup;
  if (offers.length === 0)
    return 'off: topup.offers is empty, so POST /v1/topup answers 503; fund wallets with "tollgate admin credit" or redeem codes, or configure topup (see tollgate.example.yaml)';
  const listed = offers.map((o) => `${o.name} (${o.transferMethod}) on ${o.network}`).join(', ');
  return `on: ${listed}, settled by the ${facilitator.type} facilitator, paid to ${config.topup.payTo}`;
}

function metricsState(config: Config, server: { url: string; metricsUrl: string | null }): string {
  if (!config.metrics.enabled) return 'off (metrics.enabled: false)';
  if (config.metrics.tokenEnv) return `${server.url}/metrics, with the bearer token in ${config.metrics.tokenEnv}`;
  return `${server.metricsUrl ?? `http://${config.metrics.host}:${config.metrics.port}`}/metrics (its own port, no token)`;
}
