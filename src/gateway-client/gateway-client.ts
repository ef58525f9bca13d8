import { createSiweMessage, generateSiweNonce } from 'viem/siwe';
import type { LocalAccount } from 'viem';
import { parseJsonLoosely } from '../json.ts';
import { ACTIONS, type SiweAction } from '../siwe/actions.ts';
import { GATEWAY_URL_ENV, SIWE_DOMAIN_ENV } from '../config/wallet-env.ts';

/**
 * The wallet side of Tollgate's public HTTP API: what a developer or an agent holding a private key
 * does (sign in with SIWE to manage keys, read usage). Used by `tollgate wallet` and `tollgate demo`;
 * it talks to the gateway exactly like any other client, over HTTP. Top-ups are in topup-client.ts.
 */
export interface SiweParams {
  domain: string;
  uri: string;
  /** Every domain and uri the gateway accepts (the first of each is `domain` and `uri`). */
  domains?: string[];
  uris?: string[];
  chain_ids: number[];
}

export interface GatewayClientOptions {
  /**
   * The SIWE domain to sign for when the gateway is reached by another name than its own (behind a
   * proxy, in a container): by default only the host of the base URL is signed for.
   */
  siweDomain?: string;
}

export interface CreatedKey {
  id: number;
  key: string;
  label: string;
  created_at: string;
  /** Present when a redeem code was used: what it credited. */
  redeemed_credit_usdc?: number;
}

export interface KeyCodes {
  redeemCode?: string;
  refCode?: string;
}

/** A key's restrictions as the API takes them (see POST /v1/auth/keys); null removes one. */
export interface KeyLimitFields {
  spend_limit_usdc?: unknown;
  spend_limit_period?: unknown;
  models?: unknown;
  expires_at?: unknown;
}

export interface KeyInfo {
  id: number;
  label: string;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
  last4?: string;
  spend_limit_usdc?: number | null;
  spend_limit_period?: 'total' | 'day' | 'month' | null;
  models?: string[] | null;
  expires_at?: string | null;
  spend_usdc?: number;
  reserved_usdc?: number;
  spend_resets_at?: string | null;
}

export interface Usage {
  wallet: string;
  balance_usdc: number;
  locked_usdc: number;
  available_usdc: number;
  keys: Array<{
    api_key_id: number;
    label: string;
    revoked_at: string | null;
    request_count: number;
    total_prompt_tokens: number;
    total_completion_tokens: number;
    total_charged_usdc: number;
  }>;
}

export interface TopupHistoryEntry {
  id: number;
  status: 'credited' | 'pending';
  credited_usdc: number;
  amount_usdc: number;
  transaction: string | null;
}

/** A refusal from the gateway, carrying its stable code and its explanation. */
export class GatewayError extends Error {
  override name = 'GatewayError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: unknown,
  ) {
    super(message);
  }
}

export class GatewayClient {
  private siwe?: Promise<SiweParams>;
  readonly baseUrl: string;

  constructor(
    baseUrl: string,
    readonly account: LocalAccount,
    private readonly options: GatewayClientOptions = {},
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  get wallet(): string {
    return this.account.address;
  }

  /**
   * A fresh single-use SIWE proof for this gateway, signed for one action: its statement says what
   * the proof allows, and the gateway accepts it for that alone. (The sign-in statement names the
   * gateway's session length; the CLI never opens a session.) Signed only for the domain this client
   * was pointed at (signingTarget), never for whatever domain the server announces.
   */
  async proof(action: Exclude<SiweAction, 'sign-in'>): Promise<{ message: string; signature: string }> {
    const statement = ACTIONS[action].statement(0);
    // Asked once per client; a failed ask is not kept, so the next call tries again.
    this.siwe ??= this.request<SiweParams>('GET', '/v1/auth/siwe').catch((err: unknown) => {
      this.siwe = undefined;
      throw err;
    });
    const params = await this.siwe;
    const { domain, uri } = signingTarget(this.baseUrl, params, this.options.siweDomain);
    const message = createSiweMessage({
      domain,
      address: this.account.address,
      statement,
      uri,
      version: '1',
      chainId: params.chain_ids[0] ?? 1,
      nonce: generateSiweNonce(),
      issuedAt: new Date(),
    });
    return { message, signature: await this.account.signMessage({ message }) };
  }

  /** `limits`: the key's spend controls; `codes`: a redeem code (credits the wallet) or a referral code, as made by `tollgate admin`. */
  async createKey(label = '', limits: KeyLimitFields = {}, codes: KeyCodes = {}): Promise<CreatedKey> {
    return this.request('POST', '/v1/auth/keys', {
      ...(await this.proof('create-key')),
      ...(label ? { label } : {}),
      ...limits,
      ...(codes.redeemCode !== undefined ? { redeem_code: codes.redeemCode } : {}),
      ...(codes.refCode !== undefined ? { ref_code: codes.refCode } : {}),
    });
  }

  /**
   * Signed for managing keys, which allows tightening only; when the gateway answers that the change
   * loosens the key (it decides against the key's current limits), signed again for loosening. So a
   * proof that can lift a key's limits is only ever made for a change that lifts them.
   */
  async updateKey(id: number, limits: KeyLimitFields): Promise<KeyInfo> {
    const patch = async (action: 'manage-keys' | 'loosen-key') =>
      this.request<KeyInfo>('PATCH', `/v1/auth/keys/${id}`, { ...(await this.proof(action)), ...limits });
    try {
      return await patch('manage-keys');
    } catch (err) {
      const loosens = err instanceof GatewayError && err.status === 403 ? (err.body as { loosens?: unknown } | null)?.loosens : undefined;
      if (!Array.isArray(loosens) || !loosens.length) throw err;
      return patch('loosen-key');
    }
  }

  async listKeys(): Promise<KeyInfo[]> {
    const body = await this.request<{ data: KeyInfo[] }>('GET', `/v1/auth/keys?${query(await this.proof('manage-keys'))}`);
    return body.data;
  }

  async revokeKey(id: number): Promise<void> {
    await this.request('DELETE', `/v1/auth/keys/${id}`, await this.proof('manage-keys'));
  }

  async usage(): Promise<Usage> {
    return this.request('GET', `/v1/usage/${this.wallet}?${query(await this.proof('read-usage'))}`);
  }

  async topups(): Promise<TopupHistoryEntry[]> {
    const body = await this.request<{ topups: TopupHistoryEntry[] }>('GET', `/v1/topups/${this.wallet}?${query(await this.proof('read-usage'))}`);
    return body.topups;
  }

  /** The parsed answer of a JSON call, or the gateway's refusal as a GatewayError. */
  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    return readJson<T>(await this.send(method, path, body));
  }

  /** The raw answer; only a gateway that cannot be reached is turned into an error here. */
  async send(method: string, path: string, body?: unknown): Promise<Response> {
    try {
      return await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new GatewayError(
        0,
        'UNREACHABLE',
        `cannot reach the gateway at ${this.baseUrl} (${(err as Error).cause ?? (err as Error).message}); check the URL and that it is running`,
        null,
      );
    }
  }
}

/**
 * The domain and uri a proof is signed for. SIWE binds a proof to the domain it names, so that a
 * proof made for one site is refused by another; a client that signed for whatever domain the server
 * at its URL announces would let that server (a mistyped or phished URL, anyone on the path of a
 * plain-http one) collect proofs for another gateway and relay them there. So the domain is the
 * base URL's host, or the one the user named (`--siwe-domain`, TOLLGATE_SIWE_DOMAIN), and it must be
 * among the domains the gateway accepts; the uri is the gateway's accepted uri on that host.
 */
export function signingTarget(baseUrl: string, params: SiweParams, siweDomain?: string): { domain: string; uri: string } {
  const url = new URL(baseUrl);
  const domain = siweDomain ?? url.host;
  const accepted = announced(params.domains, params.domain);
  const uris = announced(params.uris, params.uri);
  const hosts = uris?.map(httpHost);
  if (!accepted || !uris || !hosts || hosts.includes(null)) {
    throw new GatewayError(
      0,
      'SIWE_DOMAIN_MISMATCH',
      `the server at ${url.origin} does not say which SIWE domain it accepts (GET /v1/auth/siwe); nothing was signed: check the URL`,
      null,
    );
  }
  if (!accepted.includes(domain)) {
    // The announced domain is not offered as a flag to copy: a server that asks for another gateway's
    // proofs wants exactly that.
    const advice = siweDomain
      ? `check the domain you named (--siwe-domain, ${SIWE_DOMAIN_ENV})`
      : `if ${url.origin} is your gateway reached by another name than its public one (behind a proxy, in a container), pass its public domain as --siwe-domain (or ${SIWE_DOMAIN_ENV}); otherwise check the URL`;
    throw new GatewayError(
      0,
      'SIWE_DOMAIN_MISMATCH',
      `the gateway at ${url.origin} asks for proofs signed for ${accepted.join(' or ')}, not for ${domain}; nothing was signed, because a proof for another domain would be accepted there: ${advice}`,
      null,
    );
  }
  const uri = uris[hosts.indexOf(domain)] ?? uris[0]!;
  return { domain, uri };
}

/** A list the gateway announces: its strings, or the single value when it sends no list; null when malformed. */
function announced(list: unknown, single: unknown): string[] | null {
  if (list === undefined || (Array.isArray(list) && list.length === 0)) return typeof single === 'string' && single ? [single] : null;
  return Array.isArray(list) && list.every((v) => typeof v === 'string' && v) ? list : null;
}

/** The host of an http(s) URL; null for anything else. */
function httpHost(uri: string): string | null {
  try {
    const url = new URL(uri);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.host : null;
  } catch {
    return null;
  }
}

/** The JSON body of a 2xx answer, or the gateway's error as a GatewayError. */
export async function readJson<T>(res: Response): Promise<T> {
  const text = await res.text();
  const json = parseJsonLoosely(text);
  if (res.ok && json == null) {
    // Every answer of the gateway's API is JSON: a page or an empty body is another server (a
    // mistyped --gateway, a proxy's page), and reading on would crash on the missing fields.
    const type = res.headers.get('content-type')?.split(';')[0] || 'no content type';
    throw new GatewayError(
      res.status,
      'NOT_JSON',
      `the server at ${res.url ? new URL(res.url).origin : 'the gateway URL'} answered ${res.status} with ${type}, not the gateway's JSON: check --gateway (or ${GATEWAY_URL_ENV}) is the gateway's URL`,
      null,
    );
  }
  if (res.ok) return json as T;
  const code = typeof json?.error === 'string' ? json.error : `HTTP_${res.status}`;
  const message = typeof json?.message === 'string' ? json.message : text.slice(0, 200) || res.statusText;
  throw new GatewayError(res.status, code, message, json);
}

function query(p: { message: string; signature: string }): string {
  return new URLSearchParams(p).toString();
}
