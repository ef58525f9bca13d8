import { createSiweMessage, generateSiweNonce } from 'viem/siwe';
import type { LocalAccount } from 'viem';
import { parseJsonLoosely } from '../json.ts';
import { ACTIONS, type SiweAction } from '../siwe/actions.ts';

/**
 * The wallet side of Tollgate's public HTTP API: what a developer or an agent holding a private key
 * does (sign in with SIWE to manage keys, read usage). Used by `tollgate wallet` and `tollgate demo`;
 * it talks to the gateway exactly like any other client, over HTTP. Top-ups are in topup-client.ts.
 */
export interface SiweParams {
  domain: string;
  uri: string;
  chain_ids: number[];
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
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  get wallet(): string {
    return this.account.address;
  }

  /**
   * A fresh single-use SIWE proof for this gateway, with the domain and uri it announces, signed for
   * one action: its statement says what the proof allows, and the gateway accepts it for that alone.
   * (The sign-in statement names the gateway's session length; the CLI never opens a session.)
   */
  async proof(action: Exclude<SiweAction, 'sign-in'>): Promise<{ message: string; signature: string }> {
    const statement = ACTIONS[action].statement(0);
    // Asked once per client; a failed ask is not kept, so the next call tries again.
    this.siwe ??= this.request<SiweParams>('GET', '/v1/auth/siwe').catch((err: unknown) => {
      this.siwe = undefined;
      throw err;
    });
    const params = await this.siwe;
    const message = createSiweMessage({
      domain: params.domain,
      address: this.account.address,
      statement,
      uri: params.uri,
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

  /** Signed for loosening, which also covers tightening: the CLI does not read the key first to tell. */
  async updateKey(id: number, limits: KeyLimitFields): Promise<KeyInfo> {
    return this.request('PATCH', `/v1/auth/keys/${id}`, { ...(await this.proof('loosen-key')), ...limits });
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

/** The JSON body of a 2xx answer, or the gateway's error as a GatewayError. */
export async function readJson<T>(res: Response): Promise<T> {
  const text = await res.text();
  const json = parseJsonLoosely(text);
  if (res.ok) return json as T;
  const code = typeof json?.error === 'string' ? json.error : `HTTP_${res.status}`;
  const message = typeof json?.message === 'string' ? json.message : text.slice(0, 200) || res.statusText;
  throw new GatewayError(res.status, code, message, json);
}

function query(p: { message: string; signature: string }): string {
  return new URLSearchParams(p).toString();
}
