import fc from 'fast-check';
import { encodeText, junk, junkJson, objectJson, otherBodyText, trickyString, value, writeJson, type Json } from './values.ts';

/**
 * Signed things mutated: SIWE proofs for key management and x402 payment headers for top-ups.
 * Each starts from a real, valid one (signed before the run) so the mutations reach the signature
 * and chain checks instead of stopping at the first type check.
 */

/** A string changed in one place: a character replaced, inserted or removed, or cut short. */
export function mutatedString(s: string): fc.Arbitrary<string> {
  const at = fc.nat({ max: Math.max(0, s.length - 1) });
  return fc.oneof(
    fc.tuple(at, fc.string({ minLength: 1, maxLength: 1 })).map(([i, c]) => s.slice(0, i) + c + s.slice(i + 1)),
    fc.tuple(at, fc.string({ minLength: 1, maxLength: 3 })).map(([i, c]) => s.slice(0, i) + c + s.slice(i)),
    at.map((i) => s.slice(0, i) + s.slice(i + 1)),
    at.map((i) => s.slice(0, i)),
    fc.constantFrom(s.toUpperCase(), s.toLowerCase(), ` ${s}`, `${s}\n`, s + s, s.replace(/^0x/, '')),
  );
}

/** A SIWE message with one of its lines replaced (domain, address, URI, chain, nonce, dates). */
function mutatedSiweMessage(message: string): fc.Arbitrary<string> {
  const lines = message.split('\n');
  return fc.oneof(
    mutatedString(message),
    fc
      .tuple(
        fc.nat({ max: lines.length - 1 }),
        fc.oneof(
          trickyString,
          fc.constantFrom(
            'Chain ID: 1',
            'Chain ID: 99999999999999999999',
            'Nonce: 00000000',
            'Expiration Time: 2000-01-01T00:00:00Z',
            'Not Before: 2999-01-01T00:00:00Z',
            'URI: http://evil.example',
            'evil.example wants you to sign in with your Ethereum account:',
            'Version: 2',
            'Issued At: not a date',
          ),
        ),
      )
      .map(([i, line]) => lines.map((l, j) => (j === i ? line : l)).join('\n')),
  );
}

export interface SiweProofPair {
  message: string;
  signature: string;
}

/** Key-management bodies around a pool of valid proofs (each usable once: the rest are replays). */
export function keyBodyText(proofs: SiweProofPair[]): fc.Arbitrary<{ body: string; secrets: string[] }> {
  return fc.nat({ max: proofs.length - 1 }).chain((i) => {
    const p = proofs[i]!;
    const fields: Record<string, fc.Arbitrary<Json>> = {
      message: fc
        .oneof({ weight: 3, arbitrary: fc.constant(p.message) }, { weight: 3, arbitrary: mutatedSiweMessage(p.message) }, { weight: 1, arbitrary: junk })
        .map(value),
      signature: fc
        .oneof({ weight: 3, arbitrary: fc.constant(p.signature) }, { weight: 3, arbitrary: mutatedString(p.signature) }, { weight: 1, arbitrary: junk })
        .map(value),
      label: fc.oneof({ weight: 3, arbitrary: fc.string({ maxLength: 110 }).map(value) }, { weight: 1, arbitrary: junkJson }),
      ref_code: fc.oneof(fc.constantFrom('ref-abcdefghij', 'ref-', 'rc-x').map(value), junkJson),
      redeem_code: fc.oneof(fc.constantFrom('rc-abc', 'rc-', 'ref-abcdefghij').map(value), junkJson),
    };
    return fc.oneof(
      { weight: 10, arbitrary: objectJson(fields, { presentPercent: 15 }).map((j) => ({ body: writeJson(j), secrets: [p.signature] })) },
      { weight: 1, arbitrary: otherBodyText.map((body) => ({ body, secrets: [] })) },
    );
  });
}

/** The same proof as a query string, with parameters missing, repeated or mangled. */
export function keyQuery(proofs: SiweProofPair[]): fc.Arbitrary<string> {
  return fc.tuple(fc.nat({ max: proofs.length - 1 }), fc.nat({ max: 5 }), trickyString).map(([i, how, junkText]) => {
    const p = proofs[i]!;
    const m = encodeURIComponent(p.message);
    const s = encodeURIComponent(p.signature);
    const j = encodeText(junkText);
    return [
      `message=${m}&signature=${s}`,
      `message=${m}`,
      `message=${m}&message=${m}&signature=${s}`,
      `signature=${s}&signature=${j}`,
      `message=${j}&signature=${s}`,
      `${j}`,
    ][how]!;
  });
}

/** A JSON value with the thing at `path` replaced or deleted (path into nested objects). */
function setPath(root: unknown, path: string[], to: unknown | typeof DELETE): unknown {
  if (path.length === 0) return to;
  const obj = typeof root === 'object' && root !== null && !Array.isArray(root) ? { ...(root as Record<string, unknown>) } : {};
  const [head, ...rest] = path;
  const next = setPath(obj[head!], rest, to);
  if (next === DELETE) delete obj[head!];
  else obj[head!] = next;
  return obj;
}
const DELETE = Symbol('delete');

/** Every leaf path of a JSON object. */
function leafPaths(v: unknown, prefix: string[] = []): string[][] {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return [prefix];
  return Object.entries(v).flatMap(([k, x]) => leafPaths(x, [...prefix, k]));
}

const hex = (bytes: number) => fc.uint8Array({ minLength: bytes, maxLength: bytes }).map((b) => `0x${Buffer.from(b).toString('hex')}`);

/** One valid decoded payment envelope changed in one to three places (terms, nonce, signature, version, network). */
function mutatedEnvelope(envelope: Record<string, unknown>): fc.Arbitrary<unknown> {
  const paths = leafPaths(envelope);
  const change = fc.tuple(
    fc.constantFrom(...paths),
    fc.oneof(
      { weight: 3, arbitrary: junk },
      { weight: 1, arbitrary: fc.constant(DELETE) },
      { weight: 2, arbitrary: fc.oneof(hex(32), hex(20), hex(65), hex(1)) },
      { weight: 2, arbitrary: fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 256n }), fc.constantFrom(0n, 1_000_000n, 10n ** 12n)).map(String) },
    ),
  );
  const changes = fc.array(change, { minLength: 1, maxLength: 3 }).map((cs) => cs.reduce<unknown>((acc, [path, to]) => setPath(acc, path, to), envelope));
  return fc.oneof(changes, wellFormedOtherTerms(envelope));
}

/**
 * The same payment under a fresh nonce, its terms changed within their formats: it decodes and
 * matches, is recorded, and goes as far as the signature and chain checks (where it is refused).
 */
function wellFormedOtherTerms(envelope: Record<string, unknown>): fc.Arbitrary<unknown> {
  const inner = (envelope.payload as Record<string, unknown>).authorization ? 'authorization' : 'permit2Authorization';
  const uint = fc.oneof(fc.constantFrom('0', '1000000', '999999', '1000001'), fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String));
  const nonce = inner === 'authorization' ? hex(32) : fc.bigInt({ min: 0n, max: 2n ** 128n }).map(String);
  const term = inner === 'authorization' ? fc.constantFrom('value', 'validAfter', 'validBefore') : fc.constantFrom('deadline');
  return fc
    .record({ nonce, terms: fc.array(fc.tuple(term, uint), { maxLength: 2 }), signature: fc.option(hex(65), { nil: undefined }) })
    .map(({ nonce: n, terms, signature }) => {
      let out = setPath(envelope, ['payload', inner, 'nonce'], n);
      for (const [name, v] of terms) out = setPath(out, ['payload', inner, name], v);
      return signature === undefined ? out : setPath(out, ['payload', 'signature'], signature);
    });
}

/** Payment header values: valid ones (replays), mutated ones, and things that are not payments. */
export function paymentHeaderValue(envelopes: Record<string, unknown>[]): fc.Arbitrary<string> {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v) ?? '').toString('base64');
  return fc.oneof(
    { weight: 1, arbitrary: fc.constantFrom(...envelopes).map(b64) },
    {
      weight: 8,
      arbitrary: fc
        .constantFrom(...envelopes)
        .chain(mutatedEnvelope)
        .map(b64),
    },
    { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map(b64) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString('base64')) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom(...envelopes)
        .chain((e) =>
          fc.constantFrom(
            Buffer.from(JSON.stringify(e)).toString('base64url'),
            ` ${b64(e)} `,
            `${b64(e)}===`,
            b64(e).slice(0, -7),
            JSON.stringify(e),
            `${b64(e)},${b64(e)}`,
          ),
        ),
    },
    { weight: 1, arbitrary: fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 200 }) },
  );
}

/** The top-up body: `{amount}` mostly matching the signed payments (1 USD), and the rest. */
export const topupBodyText: fc.Arbitrary<string> = fc.oneof(
  { weight: 8, arbitrary: fc.constant('{"amount":1}') },
  {
    weight: 4,
    arbitrary: objectJson({ amount: fc.oneof(fc.constantFrom(1, 5, 0.000001, 0.0000001, 1.0000001, 0, -1, 1e9, 10_000, 10_001).map(value), junkJson) }).map(
      writeJson,
    ),
  },
  { weight: 1, arbitrary: otherBodyText },
);
