import { isIP } from 'node:net';
import { z } from 'zod';
import { ADDRESS_PATTERN } from '../chain/address.ts';
import { extraFieldProblem } from '../protocols/openai-chat/request-fields.ts';

/**
 * The whole configuration file, validated at start-up. Every key has a default so that an empty
 * file (or no file) yields a working gateway on SQLite. Secrets never live here: the file names the
 * environment variables that hold them (`*Env` keys), and the loader resolves those.
 * Each object section ends in `.prefault({})`: a missing section is parsed as `{}`, so its inner
 * defaults are the only place a default is written (`.default({...})` would repeat them and skip
 * the section's own checks). test/config/defaults.test.ts holds the defaults an empty file yields.
 */

// Money and prices are decimal strings so that no float ever touches a price. Numbers written in
// YAML are accepted and turned into their canonical decimal text.
const decimalString = z
  .union([z.string(), z.number()])
  .transform((v) => (typeof v === 'number' ? String(v) : v.trim()))
  .refine((v) => /^\d+(\.\d+)?$/.test(v), { message: 'must be a non-negative decimal number such as "0.15"' });

const envName = z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'must be an environment variable name such as OPENAI_API_KEY');
const positiveInt = z.number().int().positive();
/** The shortest reservation lease accepted (chat.reservationLeaseSeconds). */
export const MIN_LEASE_SECONDS = 10;

/** Whether a database URL names an engine Tollgate has: database.url, and database.urlEnv's variable (checked in load.ts). */
export const isDatabaseUrl = (v: string): boolean => v.startsWith('sqlite:') || v.startsWith('postgres://') || v.startsWith('postgresql://');
export const DATABASE_URL_FORMS = 'must start with "sqlite:" (for example sqlite:./data/tollgate.db) or "postgres://"';

const databaseUrl = z.string().refine(isDatabaseUrl, { message: DATABASE_URL_FORMS });

const window = z.object({ perMinute: positiveInt.optional(), perDay: positiveInt.optional() }).strict();

const positiveSeconds = z.number().positive();

// Which peers may set X-Forwarded-For: false (none), true (any: only when nothing but the proxy can
// reach the gateway), a hop count, or addresses/CIDRs (a comma-separated string or a list), as
// Fastify takes them. The names loopback, linklocal and uniquelocal stand for their ranges.
const trustedProxy = z.string().refine(isAddressOrCidr, {
  message: 'must be an IP address, a CIDR such as 10.0.0.0/8, or one of loopback, linklocal, uniquelocal',
});
const trustProxy = z.union([
  z.boolean(),
  z.number().int().nonnegative(),
  z.array(trustedProxy).min(1),
  z.string().transform((v, ctx) => {
    const list = v
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean);
    for (const a of list)
      if (!isAddressOrCidr(a))
        ctx.addIssue({ code: 'custom', message: `"${a}" must be an IP address, a CIDR such as 10.0.0.0/8, or one of loopback, linklocal, uniquelocal` });
    if (!list.length) ctx.addIssue({ code: 'custom', message: 'must list at least one address' });
    return list;
  }),
]);

function isAddressOrCidr(value: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(value)) return true;
  const [addr, prefix, ...rest] = value.split('/');
  const family = isIP(addr ?? '');
  if (!family || rest.length) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

// Provider extensions forwarded as sent (for example vLLM's top_k). Everything in them is
// counted as prompt input in the reservation; see docs/api.md "Forwarded fields".
const extraFields = z
  .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a JSON field name such as top_k'))
  .superRefine((names, ctx) => {
    for (const name of names) {
      const problem = extraFieldProblem(name);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }
  })
  .optional();

const openAICompatibleProvider = z
  .object({
    type: z.literal('openai-compatible').default('openai-compatible'),
    baseUrl: z.url({ message: 'must be an http(s) URL such as https://api.openai.com/v1' }),
    apiKeyEnv: envName.optional(),
    maxConnections: positiveInt.default(1024),
    extraFields,
  })
  .strict();

/** Anthropic's Messages API (transport in src/providers/anthropic/, translation in src/protocols/anthropic-messages/): the key goes in x-api-key. */
const anthropicProvider = z
  .object({
    type: z.literal('anthropic'),
    baseUrl: z.url({ message: 'must be an http(s) URL such as https://api.anthropic.com' }).default('https://api.anthropic.com'),
    apiKeyEnv: envName.default('ANTHROPIC_API_KEY'),
    maxConnections: positiveInt.default(1024),
    extraFields,
    // The `anthropic-version` header every request names.
    anthropicVersion: z.string().min(1).default('2023-06-01'),
    // Beta features turned on for every request, sent as one `anthropic-beta` header.
    anthropicBeta: z.array(z.string().regex(/^[A-Za-z0-9._-]+$/, 'must be a beta name such as prompt-caching-2024-07-31')).default([]),
  })
  .strict();

// A provider without `type` is OpenAI-compatible: most providers speak that wire format, and configs written without it keep working.
const provider = z.preprocess(
  (v) => (v && typeof v === 'object' && !Array.isArray(v) && !('type' in v) ? { ...v, type: 'openai-compatible' } : v),
  z.discriminatedUnion('type', [openAICompatibleProvider, anthropicProvider]),
);

// The OpenAI tokenizers a deployment may name as the one its provider bills with (models[].tokenizer);
// src/metered/token-bound/ counts with them.
export const TOKENIZER_FAMILIES = ['o200k', 'cl100k'] as const;
export type TokenizerFamily = (typeof TOKENIZER_FAMILIES)[number];

// Kinds of content part a model may accept besides text; each needs a token bound for the reservation.
const partKind = z.enum(['image', 'audio', 'file']);

// Another deployment of a model (src/routing/): the same model served by another configured
// provider (or under another name), tried in order when the one before it fails. Its costs are
// what that provider charges us (each defaults to the model's own); clients always pay the model's
// listed price. `weight` spreads load over adjacent deployments that all carry one (docs/api.md, Weights).
const fallback = z
  .object({
    provider: z.string().min(1),
    upstreamName: z.string().min(1).optional(),
    promptCostPer1M: decimalString.optional(),
    completionCostPer1M: decimalString.optional(),
    cachedPromptCostPer1M: decimalString.optional(),
    cacheWriteCostPer1M: decimalString.optional(),
    cacheReadCostPer1M: decimalString.optional(),
    weight: z.number().int().min(1).max(1000).optional(),
    // The tokenizer this provider bills the model with, when it is one of OpenAI's (see models[].tokenizer).
    tokenizer: z.enum(TOKENIZER_FAMILIES).optional(),
  })
  .strict();

const model = z
  .object({
    provider: z.string().min(1),
    name: z.string().min(1),
    upstreamName: z.string().min(1).optional(),
    contextLength: positiveInt,
    maxOutputTokens: positiveInt.default(16384),
    // What the model is served for: `chat` (chat completions, Responses, Messages) or `embedding`
    // (POST /v1/embeddings only). Each endpoint refuses the other type with a 400 naming the right one.
    type: z.enum(['chat', 'embedding']).default('chat'),
    promptCostPer1M: decimalString,
    // Required for chat models; an embedding model produces no completion tokens, so it may leave
    // it out (taken as 0) and may not set it above 0.
    completionCostPer1M: decimalString.optional(),
    promptPricePer1M: decimalString.optional(),
    completionPricePer1M: decimalString.optional(),
    // Prices of the prompt's cached parts (OpenAI cached reads; Anthropic cache writes and reads):
    // each cost defaults to the prompt cost, each listed price to cost × markup or the prompt's price.
    cachedPromptCostPer1M: decimalString.optional(),
    cacheWriteCostPer1M: decimalString.optional(),
    cacheReadCostPer1M: decimalString.optional(),
    cachedPromptPricePer1M: decimalString.optional(),
    cacheWritePricePer1M: decimalString.optional(),
    cacheReadPricePer1M: decimalString.optional(),
    reasoningFamily: z.enum(['none', 'thinking', 'effort']).default('none'),
    // More bare names a request may use for this model, such as the model names Claude Code sends
    // by itself (claude-opus-5-5): resolved like the model's own name, when no other model has it.
    aliases: z.array(z.string().regex(/^[A-Za-z0-9._:@-]{1,200}$/, 'must be a bare model name such as claude-opus-5-5 (no "/")')).optional(),
    // Lower max_tokens to what the wallet (and the key's spend limit) can cover, down to
    // chat.fitMaxTokensFloor, instead of answering 402; a request can ask for it with the header
    // x-tollgate-fit-max-tokens: true.
    fitMaxTokens: z.boolean().optional(),
    created: z.number().int().nonnegative().default(1735689600),
    // What the model takes as input. Without it, text only: an image, audio or file part is a 400.
    inputs: z
      .array(z.union([z.literal('text'), partKind]))
      .refine((v) => v.includes('text'), { message: 'must include text' })
      .optional(),
    // The most prompt tokens one part of each declared kind can cost; reserved per part.
    partTokenBounds: z.partialRecord(partKind, positiveInt).optional(),
    // An embedding model's vector size when a request names no `dimensions` (its native size). The
    // gateway bounds inputs × dimensions before it reserves; left out, a known model's published
    // size is used (text-embedding-3-large: 3072), else the largest the gateway serves (4096).
    dimensions: z.number().int().min(1).max(65536).optional(),
    // Deployments tried in order after this one fails (connection refused, timeout, 429, 5xx, …).
    fallbacks: z.array(fallback).max(16).optional(),
    // This deployment's share of the load among adjacent weighted deployments (see fallbacks).
    weight: z.number().int().min(1).max(1000).optional(),
    // The tokenizer the provider bills this model with, when it is one of OpenAI's (o200k: GPT-4o,
    // 4.1, 5, o-series; cl100k: GPT-4, 3.5). A request a wallet cannot cover at the byte bound is
    // then bounded by this tokenizer's count instead (src/metered/token-bound/). Without it, bytes.
    tokenizer: z.enum(TOKENIZER_FAMILIES).optional(),
  })
  .strict()
  .superRefine((m, ctx) => {
    if (m.type === 'chat' && m.completionCostPer1M === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['completionCostPer1M'],
        message: 'is required for a chat model: the provider\'s price of 1M completion tokens in USD, such as "0.6"',
      });
    }
    if (m.type === 'chat' && m.dimensions !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['dimensions'], message: 'is the vector size of an embedding model; a chat model has none, leave it out' });
    }
    if (m.type === 'embedding') {
      for (const field of ['completionCostPer1M', 'completionPricePer1M'] as const) {
        const value = m[field];
        if (value !== undefined && Number(value) !== 0)
          ctx.addIssue({ code: 'custom', path: [field], message: 'an embedding model produces no completion tokens; leave it out' });
      }
    }
    for (const kind of partKind.options) {
      const declared = m.inputs?.includes(kind) ?? false;
      const bound = m.partTokenBounds?.[kind];
      if (declared && bound === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['partTokenBounds', kind],
          message: `inputs lists ${kind}; give the most prompt tokens one ${kind} part can cost, for example ${kind === 'image' ? 1600 : m.contextLength}`,
        });
      }
      if (!declared && bound !== undefined)
        ctx.addIssue({ code: 'custom', path: ['inputs'], message: `partTokenBounds.${kind} is set but inputs does not list ${kind}` });
    }
  });

const chainRpc = z
  .object({
    rpcUrl: z.url(),
    // Where the dashboard links a transaction hash: <explorerUrl>/tx/<hash> (e.g. https://basescan.org).
    explorerUrl: z.url({ message: 'must be a block explorer base URL such as https://basescan.org' }).optional(),
    // What the dashboard calls the chain; defaults to the known name (src/chain/known-chains.ts), else "chain <id>".
    name: z.string().min(1).max(60).optional(),
  })
  .strict();

const address = z.string().regex(ADDRESS_PATTERN, 'must be a 0x-prefixed 20-byte hex address');

// One stablecoin the gateway accepts. Amounts are rendered as USD × 10^decimals, so fewer than 6
// decimals could not express every micro-USD amount; more are fine.
const offer = z
  .object({
    network: z.string().regex(/^eip155:\d+$/, 'must be a CAIP-2 EVM network such as "eip155:8453"'),
    asset: address,
    transferMethod: z.enum(['eip3009', 'permit2']),
    name: z.string().min(1),
    version: z.string().min(1),
    decimals: z.number().int().min(6).max(36).default(6),
  })
  .strict();

const facilitator = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('local'),
      relayerKeyEnv: envName.default('TOLLGATE_RELAYER_KEY'),
      allowedFactories: z.array(address).default([]),
    })
    .strict(),
  z
    .object({
      type: z.literal('remote'),
      url: z.url({ message: 'must be the facilitator base URL, such as https://x402.org/facilitator' }),
      timeoutSeconds: positiveInt.default(10),
      authTokenEnv: envName.optional(),
    })
    .strict(),
]);

const usdAmount = z
  .number()
  .positive()
  .refine((v) => Number.isInteger(Math.round(v * 1e6)) && Math.abs(v * 1e6 - Math.round(v * 1e6)) < 1e-6, {
    message: 'must be a USD amount with at most 6 decimals',
  });

export const configSchema = z
  .object({
    server: z
      .object({
        host: z.string().default('0.0.0.0'),
        port: z.number().int().min(0).max(65535).default(8080),
        // Default: http://localhost:<port> (below), so a gateway moved off 8080 (TOLLGATE_PORT, a
        // busy port) still accepts the SIWE proofs signed for the host it is reached at.
        publicUrl: z.url().optional(),
        trustProxy: trustProxy.default(false),
        corsOrigins: z
          .array(z.union([z.literal('*'), z.url()]))
          .min(1)
          .default(['*']),
        // On SIGTERM: how long in-flight requests may take to finish before they are cut and voided.
        shutdownGraceSeconds: positiveInt.default(15),
        // Slow clients (slowloris): a request's headers, and the whole request including its body,
        // must arrive within these. They bound receiving the request only, never a streamed answer.
        headersTimeoutSeconds: positiveSeconds.default(10),
        requestTimeoutSeconds: positiveSeconds.default(30),
        // After an early answer (401, 429, 413) to a request whose body is still arriving, the rest
        // is read and thrown away for this long at most, so the client can read the answer.
        lingerSeconds: positiveSeconds.default(5),
        // Extra descriptors of the API's listening socket, each accepting one new connection per
        // event-loop turn (Node 20 accepts one per turn per descriptor): a burst of new client
        // connections on a busy gateway is taken in 1 + N times fewer turns. 0: one descriptor.
        acceptCopies: z.number().int().min(0).max(64).default(8),
      })
      .refine((s) => s.headersTimeoutSeconds <= s.requestTimeoutSeconds, {
        message: 'headersTimeoutSeconds must not exceed requestTimeoutSeconds',
        path: ['headersTimeoutSeconds'],
      })
      .strict()
      .transform((s) => ({ ...s, publicUrl: s.publicUrl ?? `http://localhost:${s.port || 8080}` }))
      .prefault({}),
    database: z
      .object({ url: databaseUrl.default('sqlite:./data/tollgate.db'), urlEnv: envName.optional() })
      .strict()
      .prefault({}),
    siwe: z
      .object({
        domains: z.array(z.string().min(1)).optional(),
        uris: z.array(z.url()).optional(),
        chainIds: z.array(positiveInt).min(1).default([1, 8453, 84532]),
        windowSeconds: positiveInt.default(300),
        clockSkewSeconds: z.number().int().nonnegative().default(60),
        allowedFactories: z.array(address).default([]),
        // The one chain where contract wallets (ERC-1271 / ERC-6492) sign in and pay; keys work on
        // every chain. Default: the only one of chainIds with an RPC (src/siwe/contract-wallet-chain.ts).
        contractWalletChainId: positiveInt.optional(),
      })
      .strict()
      .prefault({}),
    chains: z.record(z.string().regex(/^\d+$/, 'must be a chain id such as "8453"'), chainRpc).default({}),
    keys: z
      .object({
        secretEnv: envName.default('TOLLGATE_KEY_SECRET'),
        maxActivePerWallet: positiveInt.default(50),
        // How long an instance may trust a key it has looked up. Capped at 5 s: a key revoked on
        // another instance must stop working everywhere within 5 s.
        lookupCacheSeconds: z.number().min(0).max(5, 'must be at most 5 (revocations must reach every instance within 5 s)').default(2),
      })
      .strict()
      .prefault({}),
    pricing: z
      .object({ markupPercent: decimalString.default('20'), listedPrices: z.enum(['billed', 'cost']).default('billed') })
      .strict()
      .prefault({}),
    providers: z.record(z.string().regex(/^[a-z0-9][a-z0-9_-]*$/, 'must be lowercase letters, digits, - or _'), provider).optional(),
    models: z.array(model).optional(),
    chat: z
      .object({
        defaultMaxTokens: positiveInt.default(1024),
        reasoning: z.enum(['reject', 'forward']).default('forward'),
        // The least max_tokens the balance fit (models[].fitMaxTokens, x-tollgate-fit-max-tokens) lowers a request to.
        fitMaxTokensFloor: positiveInt.default(4096),
        connectTimeoutSeconds: positiveInt.default(10),
        firstByteTimeoutSeconds: positiveInt.default(60),
        idleTimeoutSeconds: positiveInt.default(60),
        // false (the spec): a stream's 200 and SSE headers go out before the provider is called, and
        // a stream no deployment served ends with the protocol's error event. true: the headers wait
        // for a deployment's 200, so that failure is an HTTP status (502) the client's SDK may retry.
        streamErrorsAsStatus: z.boolean().default(false),
        // Renewed every third of itself while the request runs; a renewal may wait up to 5 s for
        // the database (SQLite's busy_timeout), so below 10 s a live request could lose its lease.
        reservationLeaseSeconds: z
          .number()
          .int()
          .min(
            MIN_LEASE_SECONDS,
            `must be at least ${MIN_LEASE_SECONDS}: the lease is renewed every third of it while the request runs, and a renewal can wait up to 5 s for the database, so a shorter lease could run out under a request that is still running`,
          )
          .default(600),
        drainTimeoutSeconds: positiveInt.default(120),
        maxConcurrentDrains: positiveInt.default(256),
        // Retries of a failed attempt on the same deployment before moving on to the next one.
        // 0: a fallback is the retry; an operator without fallbacks may want 1.
        retries: z.number().int().min(0).max(5).default(0),
        // The first retry's backoff (doubled each time, full jitter), and the longest Retry-After a
        // provider may make us wait before a retry: beyond it the gateway moves on instead.
        retryBackoffMs: z.number().int().min(0).max(60_000).default(250),
        maxRetryAfterSeconds: z.number().int().min(0).max(60).default(5),
        // No new attempt starts this long after the first one did: the chain's deadline before the
        // first byte (each attempt is also bounded by the connect and first-byte timeouts).
        attemptDeadlineSeconds: positiveInt.default(120),
        // A deployment that failed `failures` times within `windowSeconds` goes after the others
        // for `seconds` (tried only once they failed), then back in its place (state per gateway instance).
        cooldown: z
          .object({
            failures: positiveInt.default(3),
            windowSeconds: positiveInt.default(60),
            seconds: positiveInt.default(30),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    ledger: z
      .object({
        // Where settles the database did not take are kept until it does (one instance per
        // directory slot; see docs/api.md "Billing during database outages"). Default: a spool folder
        // next to the SQLite file, or ./data/spool for PostgreSQL.
        spoolDir: z.string().min(1).optional(),
        // The ledger-check checkpoint job (docs/operations.md, "Ledger-check checkpoints"): one
        // instance checks what came after the latest checkpoint every this many seconds and, when it
        // passes, stores the next, so an operator's `tollgate admin ledger-check` reads one short
        // period. 0: off (the operator's check still stores checkpoints). Unset: 60 on PostgreSQL,
        // off on SQLite; set there, each pass runs in a worker thread, since SQLite's calls are synchronous
        // and would hold the serving event loop (src/retention/checkpoint-thread.ts; checkpointEverySeconds in services.ts).
        checkpointEverySeconds: z.number().int().min(0).max(86_400).optional(),
      })
      .strict()
      .prefault({}),
    rateLimits: z
      .object({
        backend: z.enum(['memory', 'redis']).default('memory'),
        redisUrlEnv: envName.default('TOLLGATE_REDIS_URL'),
        // What a Redis outage does: `local` keeps serving with each instance enforcing its share
        // (1/instances) of every limit until Redis answers; `closed` answers 503 (src/ratelimit/create.ts).
        redisOutage: z.enum(['local', 'closed']).default('local'),
        // How many instances share the limits: during a Redis outage each allows limit/instances.
        instances: positiveInt.default(1),
        chat: window.default({ perMinute: 60, perDay: 10000 }),
        keys: window.default({ perMinute: 30 }),
        public: window.default({ perMinute: 300 }),
        // Failed authentications (bad API keys, bad SIWE proofs) per client address; successes
        // are not counted. Over it, that address gets 429 without its credentials being checked.
        authFailures: window.default({ perMinute: 30 }),
      })
      .strict()
      .prefault({}),
    limits: z
      .object({
        bodyBytes: positiveInt.default(64 * 1024),
        // 4 MiB holds a 1M-token prompt. An accepted body is decoded, parsed and measured in one
        // synchronous run: about 25 ms at 4 MiB, over 60 ms at 10 MiB on a 2-core machine.
        chatBodyBytes: positiveInt.default(4 * 1024 * 1024),
        // POST /v1/messages/count_tokens costs CPU time per byte of text and no money: its own body
        // limit (the same 4 MiB holds a 1M-token conversation); a key may have two such bodies being
        // counted at once and the instance eight (src/metered/counting-budget.ts), beyond that a 429.
        countTokensBodyBytes: positiveInt.default(4 * 1024 * 1024),
        // JSON.parse time grows with the number of values and keys, not with bytes (10 MiB of `{}`
        // takes seconds, 10 MiB of string milliseconds), so bodies are bounded in both, by a byte
        // scan before parsing: at the defaults no body blocks the event loop for more than ~50 ms.
        jsonMaxDepth: positiveInt.default(64),
        jsonMaxValues: positiveInt.default(20_000),
      })
      .strict()
      .prefault({}),
    topup: z
      .object({
        payTo: address.optional(),
        minUsd: usdAmount.default(1),
        maxUsd: usdAmount.default(10_000),
        maxTimeoutSeconds: positiveInt.default(300),
        settleWaitSeconds: positiveInt.default(30),
        reconcileIntervalSeconds: positiveInt.default(30),
        offers: z.array(offer).default([]),
        // The 402 body of top-ups and pay-per-request in x402 v1 (x402Version 1, v1 network names,
        // resource, description, mimeType) for the stock v1 clients (x402-fetch 1.x, x402-axios),
        // which read only the body. PAYMENT-REQUIRED stays v2 either way. Off by default: the
        // specification's 402 body is v2 (CAIP-2 networks). See payments/x402-v1.ts.
        x402v1Body: z.boolean().default(false),
        facilitator: facilitator.prefault({ type: 'local' }),
        // The local facilitator's relayer (docs/operations.md, "The relayer"): how long a settlement
        // waits for its turn to send (the in-process queue, then the PostgreSQL lock's lock_timeout)
        // before the payer gets 503 "send the same payment again"; how many may wait; and the
        // bounds on re-sending a stuck settlement at a higher fee.
        relayer: z
          .object({
            sendWaitSeconds: positiveInt.default(10),
            maxQueuedSends: positiveInt.default(64),
            maxFeeBumps: z.number().int().min(0).default(5),
            maxFeePerGasGwei: z.number().positive().default(200),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    // Pay-per-request x402 on POST /v1/chat/completions: a request without an Authorization header
    // is answered 402 with an offer for its reservation, rounded up to a multiple of minUsd, paid
    // through the top-up offers and facilitator (so it needs topup.offers). Off by default: with it
    // on, anonymous clients may send chat bodies (bounded by limits.chatBodyBytes and the public
    // per-IP rate limit) before they pay.
    payPerRequest: z
      .object({
        enabled: z.boolean().default(false),
        minUsd: usdAmount.default(0.01),
        // x402 `upto` beside exact: the payer signs a Permit2 maximum (the request's
        // reservation, not rounded up) and the gateway settles exactly the charge after the request.
        // Off by default: an upto answer is delivered before it is paid, so a payer who revokes
        // Permit2 meanwhile costs the operator up to one reservation (docs/operations.md).
        upto: z.boolean().default(false),
        // x402 `batch-settlement` beside exact: the payer deposits into an on-chain channel once
        // and signs a cumulative voucher per request; the gateway charges each request's actual
        // cost and claims many requests in one transaction later (docs/api.md, "Paying per token
        // with batch-settlement channels"). Off by default: served requests are claimed after the
        // answer, so until a claim lands the payer's timed withdrawal is the operator's exposure.
        batchSettlement: z
          .object({
            enabled: z.boolean().default(false),
            // The channel's timed-withdrawal delay (the spec's bounds): the time the gateway has to
            // claim what it served once a payer starts withdrawing.
            withdrawDelaySeconds: z.number().int().min(900).max(2_592_000).default(86_400),
            // The deposit the 402 asks for (extra.minDeposit); a smaller deposit is still taken.
            minDepositUsd: usdAmount.default(1),
            // The address that authorizes claims and refunds: the facilitator signs for it, so by
            // default its own (the local facilitator's key, or what a remote one's /supported
            // names); set it only for a remote facilitator that does not list it.
            receiverAuthorizer: address.optional(),
            // How long the mirrored on-chain state (balance, totalClaimed, a withdrawal) is fresh
            // enough to check a voucher without asking the chain.
            freshSeconds: positiveInt.default(30),
            // A channel's request lease; renewed every third while its request runs, so only a
            // dead instance's lease runs out.
            leaseSeconds: positiveInt.default(30),
            // The background claims (src/payments/channels/claims/): a channel is claimed once its
            // unclaimed charges reach claimThresholdUsd, or claimMaxAgeSeconds after its last claim
            // (its first request), or at once while its payer's timed withdrawal runs. A pass every
            // claimIntervalSeconds, at most 300 so that even the shortest withdrawal delay (900 s)
            // sees three passes; up to maxChannelsPerClaim channels in one claimWithSignature.
            claimThresholdUsd: usdAmount.default(1),
            claimMaxAgeSeconds: positiveInt.default(3_600),
            claimIntervalSeconds: positiveInt.max(300).default(60),
            maxChannelsPerClaim: positiveInt.max(200).default(50),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    // Stored Responses (POST /v1/responses with store: true, OpenAI's default): the Response is kept,
    // under the API key that asked (only it reads it), so previous_response_id, item_reference and GET/DELETE
    // /v1/responses/{id} work (docs/DECISIONS.md, "Stored responses"). A response beyond a bound is
    // still answered and billed, and says store: false.
    responses: z
      .object({
        store: z
          .object({
            enabled: z.boolean().default(true),
            // OpenAI keeps stored responses for 30 days; so does Tollgate by default.
            ttlSeconds: positiveInt.default(30 * 24 * 3600),
            // Input items (references resolved) plus the Response, UTF-8.
            maxBytesPerResponse: positiveInt.default(2 * 1024 * 1024),
            maxStoredPerWallet: positiveInt.default(1000),
            maxBytesPerWallet: positiveInt.default(256 * 1024 * 1024),
          })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    // Retention (docs/operations.md, "Retention"): per-request detail leaves the hot tables once a
    // ledger-check checkpoint has proven it and it is older than its window; money records
    // (ledger_entries, payments) are never removed. Off by default: removing data is the operator's
    // choice, and it needs ledger-check checkpoints (the gateway's job, ledger.checkpointEverySeconds) to know what it may remove.
    retention: z
      .object({
        enabled: z.boolean().default(false),
        // request_usage rows: exported to exportDir, then rolled into the daily and per-key totals.
        usageDays: positiveInt.default(90),
        // Finished reservations (their charge is in ledger_entries, their usage row in request_usage).
        reservationDays: positiveInt.default(7),
        exportDir: z.string().min(1).default('./usage-archive'),
        // Rows per batch: one short transaction each, so the event loop and SQLite's write lock are
        // held for milliseconds.
        batchRows: z.number().int().min(1).max(5000).default(500),
        everySeconds: positiveInt.default(60),
      })
      .strict()
      .refine((r) => r.reservationDays <= r.usageDays, {
        message: 'retention.reservationDays must not exceed retention.usageDays (a usage row leaves after its reservation)',
        path: ['reservationDays'],
      })
      .prefault({}),
    metrics: z
      .object({
        enabled: z.boolean().default(true),
        // /metrics shows revenue and locked money: by default it is served only on its own port,
        // on loopback. TOLLGATE_METRICS_PORT overrides the port (one per instance on a host).
        port: z.number().int().min(0).max(65535).default(9464),
        host: z.string().default('127.0.0.1'),
        // Set: /metrics is served on the API port instead, to requests bearing this token.
        tokenEnv: envName.optional(),
      })
      .strict()
      .prefault({}),
    errors: z
      .object({
        // spec: {error: CODE, message} everywhere (the specification's contract). openai: the
        // OpenAI-compatible endpoints (chat completions, models) answer {error: {message, type,
        // code, param}} so OpenAI SDKs can show the message; see src/http/error-format.ts.
        format: z.enum(['spec', 'openai']).default('spec'),
      })
      .strict()
      .prefault({}),
    dashboard: z
      .object({
        // The wallet dashboard page at / (top up, keys, spending) and its sessions.
        enabled: z.boolean().default(true),
        // How long a dashboard session (POST /v1/auth/session) lasts; it is never renewed.
        sessionMinutes: z
          .number()
          .int()
          .min(1)
          .max(24 * 60)
          .default(30),
      })
      .strict()
      .prefault({}),
    logging: z
      .object({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info') })
      .strict()
      .prefault({}),
  })
  .strict();

export type ConfigFile = z.infer<typeof configSchema>;
export type ModelConfig = z.infer<typeof model>;
export type ProviderConfig = z.infer<typeof provider>;
export type RateWindow = z.infer<typeof window>;
export type OfferConfig = z.infer<typeof offer>;
export type TopupConfig = z.infer<typeof configSchema>['topup'];
export type PayPerRequestConfig = z.infer<typeof configSchema>['payPerRequest'];

/** Secrets resolved from the environment variables the file names. Never logged. */
export interface Secrets {
  keySecret?: string;
  providerKeys: Record<string, string | undefined>;
  redisUrl?: string;
  /** Private key of the local facilitator's relayer (pays gas to settle top-ups). */
  relayerKey?: string;
  /** Bearer token for a remote facilitator, if it needs one. */
  facilitatorToken?: string;
  /** Bearer token for /metrics on the API port (metrics.tokenEnv). */
  metricsToken?: string;
}

/**
 * The configuration as the gateway holds it: the file after validation, with the default catalog
 * filled in, the SIWE origins and contract-wallet chain resolved, and the secrets read from the
 * environment (src/config/load.ts builds it).
 */
export interface Config extends Omit<ConfigFile, 'providers' | 'models' | 'siwe'> {
  /** Path of the file that was read, or null when running on defaults. */
  source: string | null;
  providers: Record<string, ProviderConfig>;
  models: ModelConfig[];
  /** contractWalletChainId is resolved: null when contract wallets have no chain (no RPC). */
  siwe: Omit<ConfigFile['siwe'], 'contractWalletChainId'> & { domains: string[]; uris: string[]; contractWalletChainId: number | null };
  secrets: Secrets;
}
export type ResponseStoreConfig = z.infer<typeof configSchema>['responses']['store'];
export type RetentionConfig = z.infer<typeof configSchema>['retention'];
