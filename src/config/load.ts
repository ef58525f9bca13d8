import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseYamlText } from 'yaml';
import type { z } from 'zod';
import { defaultModels, defaultProviders } from './defaults.ts';
import { resolveContractWalletChain } from '../siwe/contract-wallet-chain.ts';
import { configSchema, DATABASE_URL_FORMS, isDatabaseUrl, type Config, type ConfigFile } from './schema.ts';
import { deploymentProblem } from './fallbacks.ts';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface LoadOptions {
  /** Value of `--config`, if given. */
  path?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Values merged over the file (tests and the CLI use this for ports and database URLs). */
  overrides?: Record<string, unknown>;
}

/** Picks the file: `--config`, then `TOLLGATE_CONFIG`, then `./tollgate.yaml` if present. */
export function findConfigPath(opts: LoadOptions): string | null {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const explicit = opts.path ?? env.TOLLGATE_CONFIG;
  if (explicit) {
    const p = resolve(cwd, explicit);
    if (!existsSync(p))
      throw new ConfigError(`config file ${p} does not exist (from ${opts.path ? '--config' : 'TOLLGATE_CONFIG'}); create it from tollgate.example.yaml`);
    return p;
  }
  const fallback = resolve(cwd, 'tollgate.yaml');
  return existsSync(fallback) ? fallback : null;
}

export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const source = findConfigPath(opts);
  let raw: unknown = {};
  if (source) raw = parseYaml(readConfigFile(source), source) ?? {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError(`config file ${source} must be a YAML mapping of keys to values`);
  }
  const merged = deepMerge(dropNulls(raw as Record<string, unknown>), portsFromEnv(env));
  return parseConfig(deepMerge(merged, opts.overrides ?? {}), env, source);
}

function readConfigFile(source: string): string {
  try {
    return readFileSync(source, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'EISDIR' ? 'it is a folder, not a file' : code === 'EACCES' ? 'permission denied' : (code ?? 'read error');
    throw new ConfigError(`cannot read config file ${source}: ${why}; pass a YAML file (see tollgate.example.yaml)`);
  }
}

/** Parses the file's YAML; an error is one line with its position (the yaml package's own spans several). */
function parseYaml(text: string, source: string): unknown {
  try {
    return parseYamlText(text);
  } catch (err) {
    const e = err as Error & { linePos?: Array<{ line: number; col: number }> };
    const at = e.linePos?.[0] ? ` (line ${e.linePos[0].line}, column ${e.linePos[0].col})` : '';
    const what = (e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
    throw new ConfigError(`config file ${source} is not valid YAML${at}: ${what}`);
  }
}

/**
 * TOLLGATE_PORT overrides server.port and TOLLGATE_METRICS_PORT metrics.port, so N instances on one
 * host (a systemd template, a process manager) can share one config file. Containers usually keep
 * the file's ports.
 */
function portsFromEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const port = portVariable(env, 'TOLLGATE_PORT');
  if (port !== undefined) out.server = { port };
  const metricsPort = portVariable(env, 'TOLLGATE_METRICS_PORT');
  if (metricsPort !== undefined) out.metrics = { port: metricsPort };
  return out;
}

function portVariable(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const port = Number(raw);
  if (!/^\d{1,5}$/.test(raw) || port > 65535) throw new ConfigError(`${name} must be a port number (0-65535), got "${raw.slice(0, 20)}"`);
  return port;
}

/** Validates an already-parsed object. Exported for tests and for programmatic embedding. */
export function parseConfig(raw: unknown, env: NodeJS.ProcessEnv = {}, source: string | null = null): Config {
  const result = configSchema.safeParse(raw);
  if (!result.success) throw new ConfigError(describeIssues(result.error, source));
  const file = result.data;

  const providers = file.providers ?? defaultProviders;
  const models = file.models ?? (file.providers ? [] : defaultModels);
  for (const [i, m] of models.entries()) {
    if (!providers[m.provider]) {
      throw new ConfigError(
        `${where(source)}models.${i}.provider: "${m.provider}" is not one of the configured providers (${Object.keys(providers).join(', ') || 'none'})`,
      );
    }
    // Embeddings are forwarded to the provider's OpenAI-style /embeddings; Anthropic has none.
    if (m.type === 'embedding' && providers[m.provider]!.type !== 'openai-compatible') {
      throw new ConfigError(
        `${where(source)}models.${i}.type: "${m.provider}" is an ${providers[m.provider]!.type} provider, which serves no embeddings; put an embedding model on an openai-compatible provider`,
      );
    }
  }
  for (const [i, m] of models.entries()) {
    const problem = deploymentProblem(m, providers);
    if (problem) throw new ConfigError(`${where(source)}models.${i}.${problem}`);
  }
  const ids = new Set<string>();
  for (const [i, m] of models.entries()) {
    const id = `${m.provider}/${m.name}`;
    if (ids.has(id)) throw new ConfigError(`${where(source)}models.${i}: the model id ${id} is listed twice`);
    ids.add(id);
  }

  checkTopup(file, env, source);
  const contractWalletChain = resolveContractWalletChain(file.siwe.chainIds, file.chains, file.siwe.contractWalletChainId);
  if (!contractWalletChain.ok) throw new ConfigError(`${where(source)}${contractWalletChain.problem}`);
  const metricsToken = file.metrics.tokenEnv ? env[file.metrics.tokenEnv] || undefined : undefined;
  if (file.metrics.enabled && file.metrics.tokenEnv && (metricsToken ?? '').length < 16) {
    // Refusing to start beats serving revenue figures behind an empty or guessable token.
    throw new ConfigError(
      `${where(source)}metrics.tokenEnv is set, so ${file.metrics.tokenEnv} must hold the bearer token for /metrics (at least 16 characters, e.g. from: openssl rand -hex 32)`,
    );
  }

  const publicUrl = new URL(file.server.publicUrl);
  const databaseUrl = (file.database.urlEnv && env[file.database.urlEnv]) || file.database.url;
  // The variable's value bypasses the schema: checked here, or a typo would be taken for PostgreSQL.
  // Named, not quoted: it may hold a password.
  if (!isDatabaseUrl(databaseUrl)) throw new ConfigError(`${where(source)}database.urlEnv: ${file.database.urlEnv} ${DATABASE_URL_FORMS}`);
  const providerKeys: Record<string, string | undefined> = {};
  for (const [name, p] of Object.entries(providers)) providerKeys[name] = p.apiKeyEnv ? env[p.apiKeyEnv] : undefined;

  return {
    ...file,
    source,
    database: { ...file.database, url: databaseUrl },
    providers,
    models,
    siwe: {
      ...file.siwe,
      // The SIWE domain is never taken from request headers: by default it is the public URL's host.
      domains: file.siwe.domains ?? [publicUrl.host],
      uris: (file.siwe.uris ?? [publicUrl.origin]).map((u) => new URL(u).origin),
      contractWalletChainId: contractWalletChain.chainId,
    },
    secrets: {
      keySecret: env[file.keys.secretEnv] || undefined,
      providerKeys,
      redisUrl: env[file.rateLimits.redisUrlEnv] || undefined,
      relayerKey: file.topup.facilitator.type === 'local' ? env[file.topup.facilitator.relayerKeyEnv] || undefined : undefined,
      facilitatorToken:
        file.topup.facilitator.type === 'remote' && file.topup.facilitator.authTokenEnv ? env[file.topup.facilitator.authTokenEnv] || undefined : undefined,
      metricsToken,
    },
  };
}

/** Top-ups are off until offers are listed; once they are, everything they need must be present. */
function checkTopup(file: ConfigFile, env: NodeJS.ProcessEnv, source: string | null): void {
  const t = file.topup;
  if (t.minUsd > t.maxUsd) throw new ConfigError(`${where(source)}topup.minUsd (${t.minUsd}) is above topup.maxUsd (${t.maxUsd})`);
  const ppr = file.payPerRequest;
  if (ppr.enabled && t.offers.length === 0) {
    throw new ConfigError(
      `${where(source)}payPerRequest.enabled needs topup.offers (and topup.payTo): pay-per-request is paid through the top-up offers and facilitator`,
    );
  }
  if (ppr.enabled && ppr.minUsd > t.maxUsd) throw new ConfigError(`${where(source)}payPerRequest.minUsd (${ppr.minUsd}) is above topup.maxUsd (${t.maxUsd})`);
  if (t.offers.length === 0) return;
  if (!t.payTo) throw new ConfigError(`${where(source)}topup.payTo: required when topup.offers is set; it is the address that receives the stablecoins`);
  const seen = new Set<string>();
  for (const [i, o] of t.offers.entries()) {
    const chainId = o.network.slice('eip155:'.length);
    if (!file.chains[chainId]) {
      throw new ConfigError(
        `${where(source)}topup.offers.${i}: network ${o.network} needs chains."${chainId}".rpcUrl, which Tollgate uses to confirm payments on chain`,
      );
    }
    const key = `${o.network}/${o.asset.toLowerCase()}`;
    if (seen.has(key)) throw new ConfigError(`${where(source)}topup.offers.${i}: ${o.asset} on ${o.network} is listed twice`);
    seen.add(key);
  }
  if (t.facilitator.type === 'local' && !env[t.facilitator.relayerKeyEnv]) {
    throw new ConfigError(
      `${where(source)}topup.facilitator is local, so ${t.facilitator.relayerKeyEnv} must hold the relayer's private key (0x + 64 hex digits, an account with gas on every offered network)`,
    );
  }
  if (t.facilitator.type === 'local' && !/^0x[0-9a-fA-F]{64}$/.test(env[t.facilitator.relayerKeyEnv] ?? '')) {
    throw new ConfigError(`${where(source)}${t.facilitator.relayerKeyEnv} is not a private key: expected 0x followed by 64 hex digits`);
  }
}

function where(source: string | null): string {
  return source ? `${source}: ` : 'config: ';
}

function describeIssues(error: z.ZodError, source: string | null): string {
  const lines = error.issues.map((issue) => {
    const key = issue.path.length ? issue.path.join('.') : '(top level)';
    const message =
      issue.code === 'unrecognized_keys' ? `unknown key(s) ${issue.keys.join(', ')}; see tollgate.example.yaml for the valid keys` : issue.message;
    return `  ${key}: ${message}`;
  });
  return `invalid configuration${source ? ` in ${source}` : ''}:\n${lines.join('\n')}`;
}

/** A key left with nothing under it (every entry commented out) means "use the default". */
function dropNulls(obj: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    if (v === null) continue;
    out[k] = isPlainObject(v) ? dropNulls(v) : v;
  }
  return out;
}

function deepMerge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const cur = out[k];
    out[k] = isPlainObject(cur) && isPlainObject(v) ? deepMerge(cur, v) : v;
  }
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
