import type { DailyUsage } from '../src/usage/daily-usage.ts';
/**
 * The gateway's API as the page uses it: same origin, JSON, the dashboard session in
 * Authorization: Bearer (never a cookie). Errors keep the server's code and message, which already
 * say what to do next.
 */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: Record<string, unknown>,
  ) {
    super(message);
  }
}

export interface DashboardConfig {
  public_url: string;
  session_minutes: number;
  /** `name`: the operator's, else the known chain's (Base Sepolia), else "chain <id>". */
  chains: { id: number; name: string; explorer_url: string | null }[];
  offers: Offer[];
  min_usd: number;
  max_usd: number;
  demo_wallet: { address: `0x${string}`; private_key: `0x${string}` } | null;
}

export interface Offer {
  chain_id: number;
  network: string;
  asset: string;
  transfer_method: 'eip3009' | 'permit2';
  /** The token's EIP-712 domain name (USD Coin), which its signatures name. */
  name: string;
  /** What people call it (USDC). */
  symbol: string;
  decimals: number;
}

/** What a SIWE proof is signed for (src/siwe/actions.ts); the gateway accepts it for that alone. */
export type SiweAction = 'sign-in' | 'manage-keys' | 'read-usage' | 'create-key' | 'loosen-key';

export interface SiweInfo {
  domain: string;
  uri: string;
  chain_ids: number[];
  /** The statement to sign, by action. */
  statements: Record<SiweAction, string>;
}

export interface KeyRow {
  id: number;
  label: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
  last4: string;
}

export interface Usage {
  balance_usdc: number;
  locked_usdc: number;
  available_usdc: number;
  keys: {
    api_key_id: number;
    label: string;
    request_count: number;
    total_charged_usdc: number;
    total_prompt_tokens: number;
    total_completion_tokens: number;
  }[];
}

/** GET /v1/usage/daily's rows: the server's own type (type-only, erased from the bundle). */
export type DailyRow = DailyUsage;

export interface Topup {
  id: string;
  status: 'credited' | 'pending';
  amount_usdc: number;
  asset: string;
  network: string;
  transfer_method: string;
  transaction: string | null;
  created_at: string;
}

export async function request<T>(
  method: string,
  path: string,
  opts: { body?: unknown; session?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: T; headers: Headers }> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if (opts.session) headers.authorization = `Bearer ${opts.session}`;
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  } catch {
    throw new ApiFailure(0, 'NETWORK', 'The gateway could not be reached. Check your connection and try again.', {});
  }
  const text = await res.text();
  let body: Record<string, unknown> = {};
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    // Not JSON (a proxy's error page): keep the status.
  }
  return { status: res.status, body: body as T, headers: res.headers };
}

/** A request that must succeed (2xx): anything else becomes an ApiFailure with the server's words. */
export async function expectOk<T>(method: string, path: string, opts: Parameters<typeof request>[2] = {}): Promise<T> {
  const res = await request<Record<string, unknown>>(method, path, opts);
  if (res.status >= 200 && res.status < 300) return res.body as T;
  throw failure(res.status, res.body);
}

export function failure(status: number, body: Record<string, unknown>): ApiFailure {
  const code = typeof body.error === 'string' ? body.error : `HTTP_${status}`;
  const message = typeof body.message === 'string' ? body.message : `The gateway answered ${status}.`;
  return new ApiFailure(status, code, message, body);
}
