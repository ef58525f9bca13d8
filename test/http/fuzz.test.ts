import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { sql } from 'kysely';
import { getBalance } from '../../src/ledger/balances.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { ENGINES } from '../support/engines.ts';
import { chatBodyText } from './fuzz/chat-bodies.ts';
import { startFuzzGateway, type FuzzGateway } from './fuzz/gateway.ts';
import { keyBodyText, keyQuery, mutatedString, paymentHeaderValue, topupBodyText } from './fuzz/proofs.ts';
import { authorization, checkAnswer, contentType, describeTally, send, type FuzzRequest, type Tally } from './fuzz/requests.ts';
import { encodeText, headerText, otherBodyText, trickyString } from './fuzz/values.ts';

/**
 * A fuzz run over the chat, key-management and top-up requests, bodies and headers,
 * on the real app (Fastify's parsing, hooks and handlers through app.inject, a few raw sockets),
 * on both engines. Whatever is sent: never a 500, the app keeps answering, every error is
 * `{error, message}`, no secret is echoed; after the run no reservation is left locked, the ledger
 * invariants hold, and the funded wallet's balance is its credits minus its charges.
 *
 * TOLLGATE_FUZZ_RUNS sets the number of requests per engine (default 10,000), split between the
 * surfaces below. fast-check prints the seed and the shrunk counterexample of a failure; replay it
 * with TOLLGATE_FUZZ_SEED and TOLLGATE_FUZZ_PATH.
 */
const TOTAL_RUNS = Number(process.env.TOLLGATE_FUZZ_RUNS ?? 10_000);
const SEED = process.env.TOLLGATE_FUZZ_SEED === undefined ? undefined : Number(process.env.TOLLGATE_FUZZ_SEED);
const PATH = process.env.TOLLGATE_FUZZ_PATH;
const SHARE = { chat: 0.5, keys: 0.15, topup: 0.2, routes: 0.14, sockets: 0.01 };
const runsOf = (surface: keyof typeof SHARE) => Math.max(10, Math.round(TOTAL_RUNS * SHARE[surface]));
const options = (surface: keyof typeof SHARE): fc.Parameters<unknown> => ({ numRuns: runsOf(surface), seed: SEED, path: PATH, includeErrorInReport: true });

const withHeaders = (h: Record<string, string | undefined>): Record<string, string> =>
  Object.fromEntries(Object.entries(h).filter((e): e is [string, string] => e[1] !== undefined));

for (const engine of ENGINES) {
  describe(`fuzz: chat, keys and top-ups never 500 and keep the ledger whole (${engine})`, () => {
    let g: FuzzGateway;
    before(async () => {
      g = await startFuzzGateway(engine);
    });
    after(() => g?.stop());

    test(`chat bodies and headers (${runsOf('chat')} requests)`, async (t) => {
      const tally: Tally = new Map();
      // Most requests with a clean envelope (key, JSON, path), so the body reaches the plan, the
      // reservation, the provider and the bill; the rest with the envelope fuzzed too.
      const cleanEnvelope = fc.constant({ auth: `Bearer ${g.key}`, type: 'application/json', url: '/v1/chat/completions' });
      const fuzzedEnvelope = fc.record({
        auth: authorization(g.key, g.revokedKey),
        type: contentType,
        url: fc.constantFrom('/v1/chat/completions', '/v1/chat/completions?stream=true', '/v1/chat/completions/', '/v1/chat/completions?'),
      });
      const request = fc
        .tuple(fc.oneof({ weight: 3, arbitrary: cleanEnvelope }, { weight: 1, arbitrary: fuzzedEnvelope }), chatBodyText)
        .map(([envelope, body]) => ({ ...envelope, body }));
      await fc.assert(
        fc.asyncProperty(request, async ({ auth, type, body, url }) => {
          await send(
            g.h.gw.app,
            { method: 'POST', url, headers: withHeaders({ authorization: auth, 'content-type': type }), payload: body, secrets: [g.key, g.revokedKey] },
            tally,
          );
        }),
        options('chat'),
      );
      t.diagnostic(describeTally(tally));
    });

    test(`key management: SIWE proofs mutated, in bodies and query strings (${runsOf('keys')} requests)`, async (t) => {
      const tally: Tally = new Map();
      const signatures = g.proofs.map((p) => p.signature);
      const keyId = fc
        .oneof(fc.constantFrom('1', '2', '3', '0', '-1', '1.5', '999999999999999', '9999999999999999999', '0x1', '1e3', ' 1'), trickyString)
        .map(encodeText);
      const request = fc.oneof(
        fc.record({ body: keyBodyText(g.proofs), type: contentType }).map(
          ({ body, type }): FuzzRequest => ({
            method: 'POST',
            url: '/v1/auth/keys',
            headers: withHeaders({ 'content-type': type }),
            payload: body.body,
            secrets: body.secrets,
          }),
        ),
        keyQuery(g.proofs).map((q): FuzzRequest => ({ method: 'GET', url: `/v1/auth/keys?${q}`, headers: {}, secrets: signatures })),
        fc.record({ id: keyId, body: keyBodyText(g.proofs), type: contentType }).map(
          ({ id, body, type }): FuzzRequest => ({
            method: 'DELETE',
            url: `/v1/auth/keys/${id}`,
            headers: withHeaders({ 'content-type': type }),
            payload: body.body,
            secrets: body.secrets,
          }),
        ),
      );
      await fc.assert(
        fc.asyncProperty(request, async (r) => void (await send(g.h.gw.app, r, tally))),
        options('keys'),
      );
      t.diagnostic(describeTally(tally));
    });

    test(`top-up bodies and payment headers, valid payments mutated (${runsOf('topup')} requests)`, async (t) => {
      const tally: Tally = new Map();
      const request = fc.record({
        body: topupBodyText,
        type: contentType,
        header: fc.constantFrom('payment-signature', 'x-payment', 'both', 'none'),
        value: paymentHeaderValue(g.payments),
        other: paymentHeaderValue(g.payments),
      });
      await fc.assert(
        fc.asyncProperty(request, async ({ body, type, header, value, other }) => {
          const payment = header === 'none' ? {} : header === 'both' ? { 'payment-signature': value, 'x-payment': other } : { [header]: value };
          await send(
            g.h.gw.app,
            { method: 'POST', url: '/v1/topup', headers: withHeaders({ 'content-type': type, ...payment }), payload: body, secrets: [value, other] },
            tally,
          );
        }),
        options('topup'),
      );
      t.diagnostic(describeTally(tally));
    });

    test(`every route with any method, path parameter, credentials and body (${runsOf('routes')} requests)`, async (t) => {
      const tally: Tally = new Map();
      const routes = g.h.gw.app.registeredRoutes.map((r) => r.url);
      const param = fc.oneof(
        fc.constant(g.wallet),
        fc.constant(g.wallet.toUpperCase().replace('0X', '0x')),
        mutatedString(g.wallet),
        trickyString.map(encodeText),
      );
      const request = fc.record({
        method: fc.constantFrom('GET', 'POST', 'DELETE', 'PUT', 'PATCH', 'HEAD', 'OPTIONS'),
        route: fc.oneof(
          fc.constantFrom(...routes, '/', '/v1', '/v1/usage', '/%', '/v1/chat/completions%00', '//v1/models'),
          trickyString.map((s) => `/${encodeText(s)}`),
        ),
        param,
        query: fc.oneof(
          fc.constant(''),
          keyQuery(g.proofs).map((q) => `?${q}`),
          trickyString.map((s) => `?${encodeText(s)}=${encodeText(s)}`),
        ),
        auth: authorization(g.key, g.revokedKey),
        type: contentType,
        origin: fc.option(fc.constantFrom('https://evil.example', 'null', 'http://127.0.0.1'), { nil: undefined }),
        forwarded: fc.option(headerText, { nil: undefined }),
        body: fc.option(otherBodyText, { nil: undefined }),
      });
      await fc.assert(
        fc.asyncProperty(request, async (r) => {
          const url = r.route.replace(/:[^/]+/g, r.param) + r.query;
          const withBody = r.method !== 'GET' && r.method !== 'HEAD' && r.body !== undefined;
          await send(
            g.h.gw.app,
            {
              method: r.method as FuzzRequest['method'],
              url,
              headers: withHeaders({
                authorization: r.auth,
                'content-type': withBody ? r.type : undefined,
                origin: r.origin,
                'x-forwarded-for': r.forwarded,
                'access-control-request-method': r.method === 'OPTIONS' ? 'POST' : undefined,
              }),
              payload: withBody ? r.body : undefined,
              secrets: [g.key, g.revokedKey, ...g.proofs.map((p) => p.signature)],
            },
            tally,
          );
        }),
        options('routes'),
      );
      t.diagnostic(describeTally(tally));
    });

    test(`raw HTTP over a real socket: framing, lengths and encodings (${runsOf('sockets')} connections)`, async () => {
      const { port } = new URL(g.h.gw.url);
      const request = fc.record({
        method: fc.constantFrom('POST', 'GET', 'post', 'P\u00d6ST', 'CONNECT'),
        path: fc.constantFrom('/v1/chat/completions', '/v1/topup', '/v1/auth/keys', '*', 'http://x/v1/models', '/v1/models#x'),
        body: fc.oneof(chatBodyText, otherBodyText),
        framing: fc.constantFrom('length', 'chunked', 'both', 'short', 'bad-chunk', 'two-lengths', 'none'),
        auth: authorization(g.key, g.revokedKey),
        extra: fc.array(
          fc.tuple(fc.constantFrom('X-Payment', 'Expect', 'Content-Encoding', 'Transfer-Encoding', 'Host', 'X-Forwarded-For', 'Content-Type'), headerText),
          { maxLength: 2 },
        ),
      });
      await fc.assert(
        fc.asyncProperty(request, async (r) => {
          const body = Buffer.from(r.body);
          const head = [`${r.method} ${r.path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', 'Content-Type: application/json'];
          if (r.auth !== undefined) head.push(`Authorization: ${r.auth}`);
          for (const [k, v] of r.extra) head.push(`${k}: ${v}`);
          const framed = frame(r.framing, head, body);
          // A body shorter than its Content-Length leaves the server waiting: no answer is the answer.
          const answer = await exchange(Number(port), framed, r.framing === 'short' ? 300 : 5_000);
          if (answer.status === null) return;
          // Node answers what never becomes a request itself (400 bad framing, 417 Expect, 431);
          // those have no request id and no JSON body, and are never a 5xx. The app's answers are
          // held to the same rules as the other surfaces (checkAnswer): the provider's refusal (a
          // prompt over the model's context window, counted by the provider) is its 502, a 500 never.
          if (answer.fromApp) checkAnswer({ method: 'POST', url: r.path, headers: {}, secrets: [g.key] }, answer.status, answer.contentType, answer.body);
          else assert.ok(answer.status < 500, `server error from node over the socket: ${answer.status} ${answer.body.slice(0, 200)}`);
        }),
        options('sockets'),
      );
    });

    test('after the run: still answering, no reservation locked, ledger whole, the wallet paid exactly its charges', async () => {
      const { services, app } = g.h.gw;
      const health = await fetch(`${g.h.gw.url}/health`);
      assert.equal(health.status, 200, 'the gateway still answers on its socket');
      assert.equal((await app.inject({ method: 'GET', url: '/v1/models' })).statusCode, 200);

      // Requests still settling (a stream's bill closes after its last byte) end within the lease.
      for (let i = 0; i < 200 && services.inflight.size > 0; i++) await new Promise((r) => setTimeout(r, 50));
      assert.equal(services.inflight.size, 0, 'every request finished');
      const db = services.storage.db;
      const pending = await db.selectFrom('reservations').select(sql<number>`count(*)`.as('n')).where('status', '=', 'pending').executeTakeFirstOrThrow();
      assert.equal(Number(pending.n), 0, 'no reservation left pending');

      assert.deepEqual((await checkLedger(db)).problems, []);

      const entries = await db.selectFrom('ledger_entries').select(['amount_usdc', 'kind']).where('wallet', '=', g.wallet).execute();
      const credits = entries.filter((e) => Number(e.amount_usdc) > 0).reduce((s, e) => s + Number(e.amount_usdc), 0);
      const charges = entries.filter((e) => Number(e.amount_usdc) < 0).reduce((s, e) => s - Number(e.amount_usdc), 0);
      const charged = await db
        .selectFrom('reservations')
        .select(sql<number>`coalesce(sum(charged_usdc), 0)`.as('n'))
        .where('wallet', '=', g.wallet)
        .executeTakeFirstOrThrow();
      const balance = await getBalance(db, g.wallet);
      assert.equal(credits, g.fundedUsdc, 'the funding is the only credit');
      assert.equal(charges, Number(charged.n), 'every charge is a settled reservation');
      assert.equal(balance.balance_usdc, credits - charges);
      assert.equal(balance.locked_usdc, 0);
      assert.ok(charges > 0, 'some fuzzed chat requests went through and were billed');

      // The gateway logged no failure of its own (an "unhandled error" line is a 500 in disguise).
      const failures = g.h.gw
        .logs()
        .split('\n')
        .filter((l) => /"level":(50|60)/.test(l));
      assert.deepEqual(failures.slice(0, 5), []);
    });
  });
}

/** Request bytes with the body framed right, or wrong in one of the ways a parser must survive. */
function frame(framing: string, head: string[], body: Buffer): Buffer {
  const chunked = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
  const lines = (...extra: string[]) => Buffer.from([...head, ...extra, '', ''].join('\r\n'));
  switch (framing) {
    case 'length':
      return Buffer.concat([lines(`Content-Length: ${body.length}`), body]);
    case 'chunked':
      return Buffer.concat([lines('Transfer-Encoding: chunked'), chunked]);
    case 'both':
      return Buffer.concat([lines('Transfer-Encoding: chunked', `Content-Length: ${body.length}`), chunked]);
    case 'short':
      return Buffer.concat([lines(`Content-Length: ${body.length + 10}`), body]);
    case 'bad-chunk':
      return Buffer.concat([lines('Transfer-Encoding: chunked'), Buffer.from('zz\r\n'), body]);
    case 'two-lengths':
      return Buffer.concat([lines(`Content-Length: ${body.length}`, `Content-Length: ${body.length + 1}`), body]);
    default:
      return Buffer.concat([lines(), body]);
  }
}

/**
 * Writes the bytes and reads the answer until the server closes (Connection: close). A request the
 * server is still waiting on gets no answer: null status after `waitMs`, and the socket is cut.
 */
function exchange(port: number, bytes: Buffer, waitMs: number): Promise<{ status: number | null; fromApp: boolean; contentType: string; body: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text);
      const [headPart = '', ...rest] = text.split('\r\n\r\n');
      const contentType = /\r\ncontent-type: ([^\r]*)/i.exec(headPart)?.[1] ?? '';
      const raw = rest.join('\r\n\r\n');
      const body = /\r\ntransfer-encoding: chunked/i.test(headPart) ? dechunk(raw) : raw;
      resolve({ status: status ? Number(status[1]) : null, fromApp: /\r\nx-request-id: /i.test(headPart), contentType, body });
    });
    socket.write(bytes, () => undefined);
  });
}

function dechunk(raw: string): string {
  let out = '';
  let rest = raw;
  for (;;) {
    const nl = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, nl), 16);
    if (nl < 0 || !size) return out;
    out += rest.slice(nl + 2, nl + 2 + size);
    rest = rest.slice(nl + 2 + size + 2);
  }
}
