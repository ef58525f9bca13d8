import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { headerText } from './values.ts';

/**
 * One fuzz request and the properties every answer must have, whatever was sent: the app answers
 * (no crash, no hang), never with a 500, every error is `{error: CODE, message}`, and no secret the
 * request carried comes back in the answer.
 */
export interface FuzzRequest {
  method: InjectOptions['method'];
  url: string;
  headers: Record<string, string>;
  payload?: string;
  /** Values from the request that must never be echoed (keys, signatures, payment headers). */
  secrets: string[];
}

/**
 * The one 5xx that is not the gateway's own failure: the provider's answer passed on (a 502
 * UPSTREAM_ERROR, such as the provider refusing a prompt longer than the model's context window,
 * which only the provider's tokenizer can tell). A 500 never is.
 */
const PROVIDER_FAILURE = { status: 502, error: 'UPSTREAM_ERROR' };

/** How many answers of each kind ("402 PAYMENT_REJECTED"): shows how deep the cases went. */
export type Tally = Map<string, number>;

export async function send(app: FastifyInstance, r: FuzzRequest, tally?: Tally): Promise<{ status: number; body: string }> {
  const res = await app.inject({ method: r.method, url: r.url, headers: r.headers, payload: r.payload });
  checkAnswer(r, res.statusCode, res.headers['content-type'], res.body);
  if (tally) {
    const code = res.statusCode >= 400 && r.method !== 'HEAD' ? ` ${(JSON.parse(res.body) as { error: string }).error}` : '';
    const kind = `${res.statusCode}${code}`;
    tally.set(kind, (tally.get(kind) ?? 0) + 1);
  }
  return { status: res.statusCode, body: res.body };
}

export const describeTally = (tally: Tally) =>
  [...tally.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${k}: ${n}`)
    .join(', ');

export function checkAnswer(r: FuzzRequest, status: number, contentType: unknown, body: string): void {
  const what = `${r.method} ${r.url} -> ${status}: ${body.slice(0, 300)}`;
  assert.ok(status < 500 || status === PROVIDER_FAILURE.status, `server error: ${what}`);
  if (status >= 400 && r.method !== 'HEAD') {
    assert.match(String(contentType), /^application\/json/, `error not JSON: ${what}`);
    const raw = JSON.parse(body) as { type?: unknown; error?: any; message?: unknown };
    // /v1/messages answers in Anthropic's shape, {"type":"error","error":{type, message, code}}: the
    // same code and message, one level down.
    const parsed = raw.type === 'error' && raw.error && typeof raw.error === 'object' ? { error: raw.error.code, message: raw.error.message } : raw;
    // A stable code a client can branch on, like every error of the API (not Fastify's "Bad Request").
    assert.match(String(parsed.error), /^[A-Z][A-Z0-9_]*$/, `error code missing: ${what}`);
    if (status === PROVIDER_FAILURE.status) assert.equal(parsed.error, PROVIDER_FAILURE.error, `a 502 that is not the provider's: ${what}`);
    assert.ok(typeof parsed.message === 'string' && parsed.message.length > 0, `error message missing: ${what}`);
    // A lookup by a prototype key ("constructor", "toString") must not turn into a function's source.
    assert.doesNotMatch(parsed.message, /\[native code\]|function \w*\(/, `prototype member in the message: ${what}`);
  }
  for (const secret of r.secrets) {
    if (secret.length >= 20) assert.ok(!body.includes(secret), `a secret from the request came back: ${what}`);
  }
}

/** Content-Type headers: mostly JSON (so bodies reach the handlers), and the others a client may send. */
export const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 12, arbitrary: fc.constant('application/json') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      undefined,
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'application/json; charset=latin1',
      'application/json;;',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/octet-stream',
      'application/jsonx',
      '',
      '*/*',
      'application/json, text/plain',
      'application/vnd.api+json',
      'application/json; boundary="',
      'text/event-stream',
    ),
  },
  { weight: 1, arbitrary: headerText },
);

/** Authorization headers around a valid key: the key itself (most), a revoked one, and every way to get it wrong. */
export function authorization(valid: string, revoked: string): fc.Arbitrary<string | undefined> {
  const keyLike = fc.stringMatching(/^sk-[A-Za-z0-9_-]{10,60}$/);
  return fc.oneof(
    { weight: 10, arbitrary: fc.constant(`Bearer ${valid}`) },
    {
      weight: 4,
      arbitrary: fc.oneof(
        fc.constant(undefined),
        fc.constant(`Bearer ${revoked}`),
        fc.constantFrom(
          `bearer ${valid}`,
          `Bearer  ${valid}  `,
          `Bearer ${valid} extra`,
          `Basic ${valid}`,
          valid,
          `Bearer ${valid}x`,
          `Bearer ${valid.slice(0, -1)}`,
          `Bearer ${valid.toUpperCase()}`,
          'Bearer',
          'Bearer ',
          '',
        ),
        keyLike.map((k) => `Bearer ${k}`),
        fc.tuple(fc.constantFrom('Basic', 'Digest', 'Token', 'Bearer', 'X402', 'Negotiate'), headerText).map(([s, v]) => `${s} ${v}`),
        headerText,
      ),
    },
  );
}
