import { buildSIWxSchema, formatSIWEMessage, parseSIWxHeader, SIGN_IN_WITH_X, type SIWxExtension } from '@x402/extensions/sign-in-with-x';
import type { SiweVerifier } from './verify.ts';
import { isIssuedSiwxNonce, issueSiwxNonce } from './siwx-nonce.ts';

/**
 * Sign-In-With-X (x402's `sign-in-with-x` extension, CAIP-122): a wallet with a balance answers a
 * 402 with a signed SIWE message instead of a payment, and the request is billed to its balance.
 * The message is an EIP-4361 message like any SIWE proof, so it goes through the same verifier
 * (src/siwe/verify.ts): domain, URI origin, chain ids, clock window, the contract-wallet rule, and
 * the atomic single use of (address, nonce). What SIWX adds: the nonce must be one this gateway
 * issued for exactly the signed times (siwx-nonce.ts), the URI must name the route it is spent
 * on, and the statement is SIWX_STATEMENT, which no SIWE endpoint accepts (src/siwe/actions.ts)
 * and which is the only one accepted here, so a SIWX signature never creates a key and a dashboard
 * proof never pays for a request.
 */
export { SIGN_IN_WITH_X };

export const SIWX_STATEMENT = 'Pay for this one Tollgate request from my balance.';

/** A SIWX header is a base64 JSON object of a few hundred bytes; anything far larger is refused unread. */
const MAX_HEADER_CHARS = 8192;

export interface SiwxChallengeInput {
  /** The gateway's public URL (server.publicUrl): its host is the domain signed. */
  publicUrl: string;
  /** The full URL of the route being paid for. */
  resourceUrl: string;
  chainIds: number[];
  windowSeconds: number;
  secret: Buffer;
  now: number;
}

/** The `sign-in-with-x` entry of a 402's extensions: a fresh nonce, valid for windowSeconds. */
export function siwxChallenge(c: SiwxChallengeInput): SIWxExtension {
  const issuedAt = new Date(c.now).toISOString();
  const expirationTime = new Date(c.now + c.windowSeconds * 1000).toISOString();
  return {
    info: {
      domain: new URL(c.publicUrl).host,
      uri: c.resourceUrl,
      statement: SIWX_STATEMENT,
      version: '1',
      nonce: issueSiwxNonce(c.secret, { issuedAt, expirationTime }),
      issuedAt,
      expirationTime,
      resources: [c.resourceUrl],
    },
    supportedChains: c.chainIds.map((id) => ({ chainId: `eip155:${id}`, type: 'eip191' as const })),
    schema: buildSIWxSchema(),
  };
}

/**
 * Why no challenge this gateway issues could pass its own verifier, or null. A challenge names the
 * public URL's host as its domain and a route under the public URL as its uri, and the stock client
 * signs only for the origin it called; when siwe.domains or siwe.uris (the verifier's rules) leave
 * that host or origin out, every signed challenge would be refused, so none is offered
 * (src/http/x402/extensions.ts) and the operator is told at start-up (src/startup-warnings.ts).
 */
export function siwxConfigProblem(publicUrl: string, rules: { domains: string[]; uris: string[] }): { settings: string[]; message: string } | null {
  const { host, origin } = new URL(publicUrl);
  const rulesFor = [
    { setting: 'siwe.domains', part: 'host', value: host, accepted: rules.domains },
    { setting: 'siwe.uris', part: 'origin', value: origin, accepted: rules.uris },
  ];
  const left = rulesFor.find((r) => !r.accepted.includes(r.value));
  if (!left) return null;
  return {
    settings: [left.setting],
    message:
      `server.publicUrl's ${left.part} "${left.value}" is not among ${left.setting} (${left.accepted.join(', ')}), ` +
      'so 402s offer no sign-in-with-x challenge (every one would be refused) and wallets cannot spend a balance without an API key; ' +
      `add "${left.value}" to ${left.setting}, or set server.publicUrl to the URL clients call`,
  };
}

export type SiwxResult = { ok: true; wallet: string } | { ok: false; status: 401 | 403 | 503; reason: string };

const refuse = (reason: string): SiwxResult => ({ ok: false, status: 401, reason });

/**
 * Verifies a `sign-in-with-x` header sent to `path` and uses up its nonce; returns the signer
 * (lowercase) or why it is refused. Cheap checks first: junk never reaches the RPC or the database.
 */
export async function verifySiwxHeader(header: string, path: string, deps: { siwe: SiweVerifier; secret: Buffer }): Promise<SiwxResult> {
  if (header.length > MAX_HEADER_CHARS) return refuse(`the sign-in-with-x header is longer than ${MAX_HEADER_CHARS} characters`);
  let payload: ReturnType<typeof parseSIWxHeader>;
  try {
    payload = parseSIWxHeader(header);
  } catch (err) {
    return refuse(`the sign-in-with-x header is not a SIWX payload (${(err as Error).message})`);
  }
  if (payload.type !== 'eip191' || !/^eip155:\d+$/.test(payload.chainId)) {
    return refuse(`sign-in-with-x here takes EVM wallets only (chainId eip155:<id>, type eip191), not ${payload.chainId} / ${payload.type}`);
  }
  const { expirationTime } = payload;
  if (expirationTime === undefined || !isIssuedSiwxNonce(deps.secret, payload.nonce, { issuedAt: payload.issuedAt, expirationTime })) {
    return refuse(
      'this sign-in-with-x nonce (with its issuedAt and expirationTime) was not issued by this gateway; sign the challenge of a fresh 402 unchanged',
    );
  }
  let uriPath: string;
  try {
    uriPath = new URL(payload.uri).pathname;
  } catch {
    return refuse(`sign-in-with-x uri "${payload.uri}" is not a URL`);
  }
  if (uriPath !== path) return refuse(`this sign-in-with-x message was signed for ${uriPath}, not ${path}; sign the challenge of this route's 402`);
  let message: string;
  try {
    message = formatSIWEMessage(payload, payload.address);
  } catch (err) {
    return refuse(`the sign-in-with-x fields do not make an EIP-4361 message (${(err as Error).message})`);
  }
  const accepts = (statement: string | undefined) =>
    statement === SIWX_STATEMENT ? null : `a sign-in-with-x message must carry the statement "${SIWX_STATEMENT}"`;
  const result = await deps.siwe.verify(message, payload.signature, accepts);
  if (!result.ok) return { ok: false, status: result.status, reason: result.reason.replace(/^SIWE /, 'sign-in-with-x ') };
  return { ok: true, wallet: result.address };
}
