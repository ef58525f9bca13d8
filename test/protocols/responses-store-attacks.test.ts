import assert from 'node:assert/strict';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { pruneExpiredResponses } from '../../src/stored-responses/store.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof } from '../support/siwe.ts';

const FUNDS = 100_000_000;
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };
const CHAT_BODY_BYTES = 4 * 1024 * 1024; // the default limits.chatBodyBytes

/**
 * Attacks on stored Responses (SECURITY.md 6.3). Each test is a break: it asserts what the
 * defence must give.
 */
for (const engine of ENGINES) {
  describe(`attack: stored responses, adversarial review (${engine})`, () => {
    let h: ChatHarness;
    const skew = 0;
    before(async () => {
      h = await startChatHarness(
        engine,
        {
          keys: { lookupCacheSeconds: 0 },
          limits: { chatBodyBytes: CHAT_BODY_BYTES },
          responses: { store: { ttlSeconds: 3600, maxBytesPerResponse: 2 * 1024 * 1024 } },
        },
        { now: () => Date.now() + skew },
      );
    });
    beforeEach(() => {
      h.fake.behaviour = { usage: USAGE };
      h.fake.received.length = 0;
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const post = (key: string, body: unknown) =>
      fetch(`${h.gw.url}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: typeof body === 'string' ? body : JSON.stringify({ model: 'chat-small', ...(body as object) }),
      });
    const get = (key: string, id: string, method = 'GET') => fetch(`${h.gw.url}/v1/responses/${id}`, { method, headers: { authorization: `Bearer ${key}` } });
    const stored = async (key: string, body: Record<string, unknown> = {}) => {
      const res = await post(key, { input: 'hi', ...body });
      assert.equal(res.status, 200);
      return (await res.json()) as { id: string; store: boolean; output: { id: string }[] };
    };

    test('amplification: one stored item referenced many times expands a small body past limits.chatBodyBytes, and all of it is sent upstream', async () => {
      const w = await h.wallet(FUNDS);
      // A 40 KB answer, paid for once (a real model writes that in ~10k output tokens).
      h.fake.behaviour = { usage: USAGE, content: 'word '.repeat(8_000) };
      const first = await stored(w.key);
      assert.equal(first.store, true);
      h.fake.behaviour = { usage: USAGE };
      h.fake.received.length = 0;
      const item = first.output[0]!.id;
      const refs = 120;
      const body = JSON.stringify({
        model: 'chat-small',
        store: false,
        input: [{ role: 'user', content: 'x' }, ...Array.from({ length: refs }, () => ({ type: 'item_reference', id: item }))],
      });
      const res = await post(w.key, body);
      const text = await res.text();
      const sent = h.fake.received.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r.body)), 0);
      console.log(
        `[${engine}] request ${body.length} B -> upstream ${sent} B (${(sent / body.length).toFixed(0)}x), status ${res.status}: ${text.slice(0, 200)}`,
      );
      // Expected: the resolved request is held to the same byte bound as a request sent whole
      // (limits.chatBodyBytes), and refused before anything is reserved or sent.
      assert.ok(res.status === 400 || res.status === 413, `status ${res.status}`);
      assert.equal(h.fake.received.length, 0, `${sent} bytes went upstream for a ${body.length}-byte request`);
    });

    test('amplification: 1,000 references of a 40 KB item (a 70 KB body) build a 40 MB upstream body on the event loop; nothing bounds the expansion', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, content: 'word '.repeat(8_000) };
      const first = await stored(w.key);
      h.fake.behaviour = { usage: USAGE };
      h.fake.received.length = 0;
      const item = first.output[0]!.id;
      // The JSON parser allows 20,000 values: up to ~6,600 references a request. Each reference
      // is ~60 bytes and may name an item of up to maxBytesPerResponse (2 MiB by default).
      const body = JSON.stringify({
        model: 'chat-small',
        store: false,
        input: [{ role: 'user', content: 'x' }, ...Array.from({ length: 1_000 }, () => ({ type: 'item_reference', id: item }))],
      });
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const t0 = performance.now();
      const res = await post(w.key, body);
      const text = await res.text();
      const ms = performance.now() - t0;
      delay.disable();
      const sent = h.fake.received.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r.body)), 0);
      console.log(
        `[${engine}] 1,000 references: ${body.length} B request -> ${sent} B upstream, ${ms.toFixed(0)} ms, max event-loop delay ${(delay.max / 1e6).toFixed(0)} ms, status ${res.status}: ${text.slice(0, 120)}`,
      );
      assert.ok(res.status === 400 || res.status === 413, `status ${res.status}`);
      assert.equal(h.fake.received.length, 0);
    });

    test('held: many distinct item_reference ids are a 4xx (the JSON parser bound of 20,000 values), never a database error', async () => {
      const w = await h.wallet(FUNDS);
      const input = [{ role: 'user', content: 'x' }, ...Array.from({ length: 70_000 }, (_, i) => ({ type: 'item_reference', id: `m${i}` }))];
      const body = JSON.stringify({ model: 'chat-small', input });
      assert.ok(body.length < CHAT_BODY_BYTES);
      const res = await post(w.key, body);
      const text = await res.text();
      console.log(`[${engine}] 70k distinct references: status ${res.status}: ${text.slice(0, 300)}`);
      assert.ok(res.status >= 400 && res.status < 500, `status ${res.status}: ${text.slice(0, 300)}`);
      assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
    });

    test('an id with a NUL byte is the same 404 as any unknown id (GET, DELETE, previous_response_id, item_reference), never a 500', async () => {
      const w = await h.wallet(FUNDS);
      const results: string[] = [];
      for (const [what, res] of [
        ['GET', await get(w.key, 'resp_%00abc')],
        ['DELETE', await get(w.key, 'resp_%00abc', 'DELETE')],
        ['previous_response_id', await post(w.key, { input: 'hi', previous_response_id: 'resp_\u0000abc' })],
        [
          'item_reference',
          await post(w.key, {
            input: [
              { role: 'user', content: 'hi' },
              { type: 'item_reference', id: 'msg_\u0000abc' },
            ],
          }),
        ],
      ] as const) {
        results.push(`${what}: ${res.status} ${(await res.text()).slice(0, 160)}`);
      }
      console.log(`[${engine}] NUL ids:\n  ${results.join('\n  ')}`);
      for (const r of results) assert.match(r, /: 404 /, r);
      assert.equal(h.fake.received.length, 0);
    });

    test("a restricted key (models and spend limit set by the owner) reads and deletes the conversations of the wallet's other keys", async () => {
      const w = await h.wallet(FUNDS);
      const secret = await stored(w.key, { input: "the owner's private conversation" });
      // The owner hands a narrow key to a third party: one model it may not even use here, 1 cent of spend.
      const narrow = await call(h.gw.url, 'POST', '/v1/auth/keys', {
        ...(await createKeyProof(w.account)),
        models: ['fake/thinker'],
        spend_limit_usdc: 10_000,
        label: 'contractor',
      });
      assert.equal(narrow.status, 201, narrow.text);
      const read = await get(narrow.body.key, secret.id);
      const readText = await read.text();
      console.log(`[${engine}] narrow key GET of the owner's response: ${read.status} ${readText.slice(0, 200)}`);
      const del = await get(narrow.body.key, secret.id, 'DELETE');
      console.log(`[${engine}] narrow key DELETE of the owner's response: ${del.status}`);
      // Expected (least privilege): a key reads only what it stored, or at least not what another key stored.
      assert.equal(read.status, 404);
      assert.equal(del.status, 404);
      assert.equal((await get(w.key, secret.id)).status, 200);
    });

    test('held: ids in odd forms (case, whitespace, encoding, traversal, item id as response id and back, very long) reach nothing', async () => {
      const w = await h.wallet(FUNDS);
      const res = await stored(w.key);
      const item = res.output[0]!.id;
      const statuses: string[] = [];
      for (const id of [res.id.toUpperCase(), ` ${res.id}`, `${res.id}%20`, encodeURIComponent(`../${res.id}`), `${res.id}%2F..`, item, 'x'.repeat(5_000)]) {
        statuses.push(`GET ${id.slice(0, 40)}: ${(await get(w.key, id)).status}`);
      }
      for (const prev of [item, res.id.toUpperCase(), `${res.id} `, 'r'.repeat(200_000)]) {
        statuses.push(`previous_response_id ${prev.slice(0, 40)}: ${(await post(w.key, { input: 'hi', previous_response_id: prev })).status}`);
      }
      statuses.push(
        `item_reference to a response id: ${
          (
            await post(w.key, {
              input: [
                { role: 'user', content: 'hi' },
                { type: 'item_reference', id: res.id },
              ],
            })
          ).status
        }`,
      );
      console.log(`[${engine}] odd ids: ${statuses.join('; ')}`);
      for (const s of statuses) assert.match(s, /: (404|414)$/, s); // 414: a URL over the server's limit, whatever the id
      assert.equal(h.fake.received.length, 1, 'only the request that stored it reached the provider');
    });

    test('held: 20 concurrent requests of one wallet with 5 places left of maxStoredPerWallet', async () => {
      const w = await h.wallet(FUNDS);
      const db = h.gw.services.storage.db;
      // The wallet already holds 995 of its 1,000 (rows as the keeper writes them).
      const now = Date.now() + skew;
      const rows = Array.from({ length: 995 }, (_, i) => ({
        id: `resp_full${String(i).padStart(28, '0')}${w.keyId}`,
        wallet: w.account.address.toLowerCase(),
        api_key_id: w.keyId,
        created_at: now,
        expires_at: now + 3600_000,
        bytes: 10,
        input_json: '[]',
        response_json: '{"output":[]}',
      }));
      for (let i = 0; i < rows.length; i += 200)
        await db
          .insertInto('stored_responses')
          .values(rows.slice(i, i + 200))
          .execute();
      const before = 995;
      h.fake.behaviour = { usage: USAGE, delayMs: 200 };
      const statuses = await Promise.all(Array.from({ length: 20 }, () => post(w.key, { input: 'hi' }).then((r) => r.headers.get('x-tollgate-store'))));
      const kept = (await db.selectFrom('stored_responses').select('id').where('api_key_id', '=', w.keyId).execute()).length - before;
      console.log(`[${engine}] 20 concurrent requests with 5 places left of maxStoredPerWallet 1000: ${kept} kept; headers ${statuses.join(',')}`);
      // The check is read-then-write (documented): at least the free places are filled, and the
      // overshoot is bounded by the requests in flight. Measured: 5 on SQLite (its writes
      // serialise), 5 to 16 on PostgreSQL across runs.
      assert.ok(kept >= 5 && kept <= 20, `${kept} kept`);
      assert.equal(statuses.filter((s) => s === 'stored').length, kept, 'the header says stored exactly for the responses kept');
    });

    test('pruning keeps up: one pass of the expiry job frees every expired response, however many', async () => {
      const db = h.gw.services.storage.db;
      const w = await h.wallet(FUNDS);
      const now = Date.now() + skew;
      // 1,200 rows written as the keeper writes them, already expired (a gateway storing more than
      // 500 responses a minute, the AI SDK's default, outgrows a job that frees 500 a minute).
      const rows = Array.from({ length: 1_200 }, (_, i) => ({
        id: `resp_prune${String(i).padStart(27, '0')}`,
        wallet: w.account.address.toLowerCase(),
        api_key_id: w.keyId,
        created_at: now - 7200_000,
        expires_at: now - 3600_000,
        bytes: 10,
        input_json: '[]',
        response_json: '{"output":[]}',
      }));
      for (let i = 0; i < rows.length; i += 200)
        await db
          .insertInto('stored_responses')
          .values(rows.slice(i, i + 200))
          .execute();
      const pruned = await pruneExpiredResponses(db, Date.now() + skew);
      const left = (await db.selectFrom('stored_responses').select('id').where('id', 'like', 'resp_prune%').execute()).length;
      console.log(`[${engine}] one pruning pass removed ${pruned}; ${left} expired rows left for later minutes`);
      assert.equal(left, 0);
    });
  });
}
