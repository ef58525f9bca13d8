import { parseConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { createLogger } from '../../src/http/logger.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { startServer, type RunningServer } from '../../src/main.ts';
import type { Engine } from '../../src/storage/database.ts';
import { capturedLines } from './capture-logger.ts';
import { freshDatabaseUrl } from './engines.ts';
import { TEST_ORIGIN } from './origin.ts';
import { parseJsonLoosely } from '../../src/json.ts';

export interface TestGateway extends RunningServer {
  config: Config;
  /** Every log line the gateway wrote, as text. */
  logs(): string;
  /** Throws with the list of problems if any money invariant fails. */
  assertLedger(): Promise<void>;
}

export interface TestGatewayOptions {
  engine: Engine;
  /** Config keys merged over the test defaults. */
  config?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  /** Reuse a database (restart tests). */
  databaseUrl?: string;
  now?: () => number;
}

export { TEST_DOMAIN, TEST_ORIGIN } from './origin.ts';

/** A real gateway listening on 127.0.0.1 and a free port, with its logs captured. */
export async function startTestGateway(opts: TestGatewayOptions): Promise<TestGateway> {
  const databaseUrl = opts.databaseUrl ?? (await freshDatabaseUrl(opts.engine));
  const config = parseConfig(
    mergeConfig(
      {
        server: { host: '127.0.0.1', port: 0, publicUrl: TEST_ORIGIN },
        database: { url: databaseUrl },
        logging: { level: 'info' },
        // Any free port: the default 9464 would collide between gateways running side by side.
        metrics: { port: 0 },
        // Many tests send bad keys and proofs on purpose; the failure limit has its own test.
        rateLimits: { authFailures: { perMinute: 100_000 } },
      },
      opts.config ?? {},
    ),
    opts.env ?? {},
  );
  const { lines, sink } = capturedLines();
  const server = await startServer(config, { logger: createLogger('info', sink), now: opts.now });
  return {
    ...server,
    config,
    logs: () => lines.join(''),
    async assertLedger() {
      const result = await checkLedger(server.services.storage.db);
      if (!result.ok) throw new Error(`ledger invariants failed:\n${result.problems.join('\n')}`);
    },
  };
}

export function mergeConfig(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const cur = out[k];
    out[k] =
      cur && typeof cur === 'object' && !Array.isArray(cur) && v && typeof v === 'object' && !Array.isArray(v)
        ? mergeConfig(cur as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

/** JSON request helper returning status, headers and parsed body. */
export async function call(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: parseJsonLoosely(text), text };
}
