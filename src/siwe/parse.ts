/**
 * Strict EIP-4361 parsing on viem's SIWE helpers. viem's parseSiweMessage is a pair of regular
 * expressions: it skips what does not match and ignores trailing text, so on its own it would accept
 * messages the former ABNF parser (@spruceid/siwe-parser) refused. A message is therefore accepted
 * only when viem's createSiweMessage, which validates every field (domain, EIP-55 address, URI,
 * nonce, version 1, resources), renders its parsed fields back to exactly the text that was signed.
 */

/** The fields Tollgate checks; times stay the strings that were signed (RFC 3339). */
export interface SiweFields {
  domain: string;
  address: string;
  uri: string;
  version: string;
  chainId: number;
  nonce: string;
  issuedAt: string;
  expirationTime?: string;
  notBefore?: string;
  /** The human-readable sentence the wallet showed; it names the action (src/siwe/actions.ts). */
  statement?: string;
}

export type SiweParse = { ok: true; fields: SiweFields } | { ok: false; problem: string };

// viem/siwe is loaded by the first sign-in, not when the gateway starts.
let siwe: Promise<typeof import('viem/siwe')> | undefined;
const loadSiwe = () => (siwe ??= import('viem/siwe'));

const REQUIRED = ['domain', 'address', 'uri', 'version', 'chainId', 'nonce', 'issuedAt'] as const;

/** The exact text of a time line, as signed (viem's parser turns it into a Date). */
function rawLine(message: string, label: string): string | undefined {
  return message.match(new RegExp(`\\n${label}: (.+)`))?.[1];
}

export async function parseSiwe(message: string): Promise<SiweParse> {
  const { createSiweMessage, parseSiweMessage } = await loadSiwe();
  const parsed = parseSiweMessage(message);
  const missing = REQUIRED.filter((f) => parsed[f] === undefined);
  if (missing.length) return { ok: false, problem: `missing or unreadable ${missing.join(', ')}` };
  if (parsed.version !== '1') return { ok: false, problem: 'Version must be 1' };
  const times = { issuedAt: rawLine(message, 'Issued At'), expirationTime: rawLine(message, 'Expiration Time'), notBefore: rawLine(message, 'Not Before') };
  for (const [field, date] of [
    ['issuedAt', parsed.issuedAt],
    ['expirationTime', parsed.expirationTime],
    ['notBefore', parsed.notBefore],
  ] as const) {
    if (date && Number.isNaN(date.getTime())) return { ok: false, problem: `${field} is not an RFC 3339 time` };
  }
  // Rendered with the times exactly as signed: createSiweMessage would write toISOString(), and a
  // client may sign "2025-01-01T00:00:00Z" as validly as "2025-01-01T00:00:00.000Z".
  const asSigned = (raw: string | undefined) => (raw === undefined ? undefined : ({ toISOString: () => raw } as Date));
  let rendered: string;
  try {
    rendered = createSiweMessage({
      ...parsed,
      address: parsed.address!,
      chainId: parsed.chainId!,
      domain: parsed.domain!,
      nonce: parsed.nonce!,
      uri: parsed.uri!,
      version: '1',
      issuedAt: asSigned(times.issuedAt),
      expirationTime: asSigned(times.expirationTime),
      notBefore: asSigned(times.notBefore),
    });
  } catch (err) {
    // viem's message: "Invalid Sign-In with Ethereum message field "nonce"." and details below.
    return { ok: false, problem: String((err as Error).message).split('\n')[0]! };
  }
  if (rendered !== message) {
    return { ok: false, problem: 'it is not in the exact EIP-4361 form (checksummed address, line order, no extra text)' };
  }
  return {
    ok: true,
    fields: {
      domain: parsed.domain!,
      address: parsed.address!,
      uri: parsed.uri!,
      version: parsed.version,
      chainId: parsed.chainId!,
      nonce: parsed.nonce!,
      issuedAt: times.issuedAt!,
      expirationTime: times.expirationTime,
      notBefore: times.notBefore,
      statement: parsed.statement,
    },
  };
}
