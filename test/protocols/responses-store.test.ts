import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { pruneExpiredResponses } from '../../src/stored-responses/store.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, siweProof } from '../support/siwe.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };
const CHARGE = 60; // 10 × 1.2 + 20 × 2.4
const CONTENT = 'Hello from the fake provider, a stand-in for a paid model.';
const TTL_SECONDS = 3600;

/**
 * Stored Responses on both engines (docs/DECISIONS.md, "Stored responses"): ownership by the API key, the
 * bounds, expiry, the prompt bound of referenced items, and what is never stored. The ledger
 * invariants are checked after every test.
 */
for (const engine of ENGINES) {
  describe(`attack: stored responses (${engine})`, () => {
    let h: ChatHarness;
    // The gateway's clock runs ahead of real time by `skew` (the expiry test moves it).
    let skew = 0;
    before(async () => {
      h = await startChatHarness(
        engine,
        {
          keys: { lookupCacheSeconds: 0 },
          responses: { store: { ttlSeconds: TTL_SECONDS, maxStoredPerWallet: 3, maxBytesPerResponse: 40_000 } },
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

    const post = (key: string, body: Record<string, unknown>) =>
      fetch(`${h.gw.url}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', ...body }),
      });
    const get = (key: string, id: string, method = 'GET') => fetch(`${h.gw.url}/v1/responses/${id}`, { method, headers: { authorization: `Bearer ${key}` } });
    const stored = async (key: string, body: Record<string, unknown> = {}) => {
      const res = await post(key, { input: 'hi', ...body });
      assert.equal(res.status, 200);
      return (await res.json()) as { id: string; store: boolean; output: { id: string }[] };
    };
    /** A 404 body with the id in it replaced, so two refusals can be compared whole. */
    const refusal = async (res: Response, id: string) => {
      assert.equal(res.status, 404);
      return JSON.stringify(await res.json()).replaceAll(id, '<id>');
    };
    const unknownId = () => `resp_${'0'.repeat(31)}${Math.floor(Math.random() * 10)}`;

    test("another wallet's response is a 404 exactly like a missing id, in GET, DELETE, previous_response_id and item_reference; nothing is reserved", async () => {
      const owner = await h.wallet(FUNDS);
      const other = await h.wallet(FUNDS);
      const res = await stored(owner.key);
      const missing = unknownId();
      assert.equal(await refusal(await get(other.key, res.id), res.id), await refusal(await get(other.key, missing), missing));
      assert.equal(await refusal(await get(other.key, res.id, 'DELETE'), res.id), await refusal(await get(other.key, missing, 'DELETE'), missing));
      assert.equal(
        await refusal(await post(other.key, { input: 'and?', previous_response_id: res.id }), res.id),
        await refusal(await post(other.key, { input: 'and?', previous_response_id: missing }), missing),
      );
      const item = res.output[0]!.id;
      const missingItem = `msg_${'0'.repeat(32)}`;
      assert.equal(
        await refusal(
          await post(other.key, {
            input: [
              { role: 'user', content: 'hi' },
              { type: 'item_reference', id: item },
            ],
          }),
          item,
        ),
        await refusal(
          await post(other.key, {
            input: [
              { role: 'user', content: 'hi' },
              { type: 'item_reference', id: missingItem },
            ],
          }),
          missingItem,
        ),
      );
      assert.equal(h.fake.received.length, 1, "only the owner's request reached the provider");
      assert.deepEqual(await h.balance(other.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
      // The owner's response is untouched by the other wallet's DELETE.
      assert.equal((await get(owner.key, res.id)).status, 200);
    });

    test('ownership is the key: another key of the same wallet gets the same 404 as a missing id (GET, DELETE, previous_response_id, item_reference); the key that stored it still reads it; once that key is revoked it is 401 and its responses stay unreachable', async () => {
      const w = await h.wallet(FUNDS);
      const res = await stored(w.key);
      const second = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(w.account));
      assert.equal(second.status, 201, second.text);
      const other: string = second.body.key;
      const missing = unknownId();
      assert.equal(await refusal(await get(other, res.id), res.id), await refusal(await get(other, missing), missing));
      assert.equal(await refusal(await get(other, res.id, 'DELETE'), res.id), await refusal(await get(other, missing, 'DELETE'), missing));
      assert.equal(
        await refusal(await post(other, { input: 'and?', previous_response_id: res.id }), res.id),
        await refusal(await post(other, { input: 'and?', previous_response_id: missing }), missing),
      );
      const item = res.output[0]!.id;
      const missingItem = `msg_${'0'.repeat(32)}`;
      assert.equal(
        await refusal(
          await post(other, {
            input: [
              { role: 'user', content: 'hi' },
              { type: 'item_reference', id: item },
            ],
          }),
          item,
        ),
        await refusal(
          await post(other, {
            input: [
              { role: 'user', content: 'hi' },
              { type: 'item_reference', id: missingItem },
            ],
          }),
          missingItem,
        ),
      );
      assert.equal(h.fake.received.length, 1, 'only the request that stored it reached the provider');
      // The other key's DELETE removed nothing: the key that stored it reads and continues it.
      const read = await get(w.key, res.id);
      assert.equal(read.status, 200);
      assert.equal((await read.json()).id, res.id);
      assert.equal((await post(w.key, { input: 'and?', previous_response_id: res.id, store: false })).status, 200);
      assert.deepEqual(h.fake.received[1]!.body.messages, [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: CONTENT },
        { role: 'user', content: 'and?' },
      ]);
      // Rotation: the revoked key is a 401, and no other key of the wallet reaches what it stored.
      const revoked = await call(h.gw.url, 'DELETE', `/v1/auth/keys/${w.keyId}`, await siweProof(w.account));
      assert.equal(revoked.status, 200, revoked.text);
      assert.equal((await get(w.key, res.id)).status, 401);
      assert.equal((await get(other, res.id)).status, 404);
    });

    test('a response whose request failed is never stored: the id from response.created is a 404, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, cutAfterChunks: 2 };
      const res = await post(w.key, { input: 'hi', stream: true });
      const text = await res.text();
      const id = /"id":"(resp_[0-9a-f]{32})"/.exec(text)![1]!;
      assert.match(text, /response\.failed/);
      h.fake.behaviour = { usage: USAGE };
      assert.equal((await get(w.key, id)).status, 404);
      assert.equal((await post(w.key, { input: 'and?', previous_response_id: id })).status, 404);
      // A refused request (402) has no response at all.
      const poor = await h.wallet(1);
      assert.equal((await post(poor.key, { input: 'hi' })).status, 402);
      assert.equal(
        (await h.gw.services.storage.db.selectFrom('stored_responses').select('id').where('api_key_id', 'in', [w.keyId, poor.keyId]).execute()).length,
        0,
      );
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS);
    });

    test('the prompt bound counts referenced items: a tiny request continuing a large stored conversation reserves what sending it whole would, and is a 402 the balance cannot cover', async () => {
      const w = await h.wallet(FUNDS);
      const big = 'word '.repeat(6_000); // 30 KB: under maxBytesPerResponse, about 30,000 bytes of prompt bound
      const first = await stored(w.key, { input: big });
      assert.equal(first.store, true);
      // Leave the wallet able to pay for a tiny request but not for the stored conversation.
      const { balance_usdc } = await h.balance(w.account);
      await adjustBalance(h.gw.services.storage.db, { wallet: w.account.address, amountUsdc: 20_000 - balance_usdc, note: 'test: leave 20000' });
      assert.equal((await post(w.key, { input: 'tiny', store: false })).status, 200, 'a tiny request alone is affordable');

      const continued = await post(w.key, { input: 'tiny', previous_response_id: first.id, store: false });
      assert.equal(continued.status, 402);
      const byReference = await continued.json();
      const inline = await post(w.key, {
        input: [
          { role: 'user', content: big },
          { role: 'assistant', content: CONTENT },
          { role: 'user', content: 'tiny' },
        ],
        store: false,
      });
      assert.equal(inline.status, 402);
      assert.equal(byReference.required_usdc, (await inline.json()).required_usdc, 'the same reservation as the conversation sent whole');
      assert.ok(byReference.required_usdc > 30_000 * 1.2, `reserved ${byReference.required_usdc}`);

      const byItem = await post(w.key, {
        input: [
          { role: 'user', content: big },
          { type: 'item_reference', id: first.output[0]!.id },
          { role: 'user', content: 'tiny' },
        ],
        store: false,
      });
      assert.equal(byItem.status, 402);
      assert.equal((await byItem.json()).required_usdc, byReference.required_usdc);
      assert.equal(h.fake.received.length, 2, 'the refused continuations never reached the provider');
    });

    test('beyond maxBytesPerResponse: the answer is delivered and billed, says store: false, and is not kept (JSON and stream)', async () => {
      const w = await h.wallet(FUNDS);
      const big = 'x'.repeat(45_000);
      const res = await post(w.key, { input: big });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-store'), 'not-stored; reason=too_large');
      const body = await res.json();
      assert.equal(body.store, false);
      assert.equal((await get(w.key, body.id)).status, 404);
      const streamed = await (await post(w.key, { input: big, stream: true })).text();
      const completed = JSON.parse(/event: response\.completed\ndata: (.*)\n/.exec(streamed)![1]!);
      assert.equal(completed.response.store, false);
      assert.equal((await get(w.key, completed.response.id)).status, 404);
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 2 * 60 - 0, 'both billed');
    });

    test('beyond maxStoredPerWallet: delivered and billed, store: false, x-tollgate-store says why; a DELETE makes room', async () => {
      const w = await h.wallet(FUNDS);
      const kept = [await stored(w.key), await stored(w.key), await stored(w.key)];
      assert.ok(kept.every((r) => r.store));
      const res = await post(w.key, { input: 'hi' });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-store'), 'not-stored; reason=wallet_full');
      const over = await res.json();
      assert.equal(over.store, false);
      assert.equal((await get(w.key, over.id)).status, 404);
      assert.equal((await get(w.key, kept[0]!.id, 'DELETE')).status, 200);
      assert.equal((await stored(w.key)).store, true);
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 5 * CHARGE);
    });

    test('concurrent DELETEs of one response: exactly one succeeds, the rest are 404', async () => {
      const w = await h.wallet(FUNDS);
      const res = await stored(w.key);
      const statuses = (await Promise.all(Array.from({ length: 6 }, () => get(w.key, res.id, 'DELETE')))).map((r) => r.status).sort();
      assert.deepEqual(statuses, [200, 404, 404, 404, 404, 404]);
      const db = h.gw.services.storage.db;
      assert.equal((await db.selectFrom('stored_response_items').select('id').where('response_id', '=', res.id).execute()).length, 0);
    });

    test('previous_response_id without input is refused for the missing input, after the reference was checked; nothing reserved', async () => {
      const w = await h.wallet(FUNDS);
      const res = await stored(w.key);
      const noInput = await post(w.key, { previous_response_id: res.id });
      assert.equal(noInput.status, 400);
      assert.equal((await noInput.json()).param, 'input');
      assert.equal((await post(w.key, { previous_response_id: unknownId() })).status, 404);
      assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS - CHARGE, locked_usdc: 0, available_usdc: FUNDS - CHARGE });
    });

    test('store: false keeps nothing; a response that is kept is readable as it was delivered', async () => {
      const w = await h.wallet(FUNDS);
      const none = await post(w.key, { input: 'hi', store: false });
      assert.equal(none.headers.get('x-tollgate-store'), null);
      assert.equal((await get(w.key, (await none.json()).id)).status, 404);
      const res = await post(w.key, { input: 'hi' });
      assert.equal(res.headers.get('x-tollgate-store'), 'stored');
      const body = await res.json();
      assert.deepEqual(await (await get(w.key, body.id)).json(), body);
    });

    test('the expansion bound: references are sized from the item rows before any JSON is loaded; past limits.chatBodyBytes a 413 says how big and what to do, nothing reserved; under it the request goes on', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, content: 'word '.repeat(3_000) }; // a 15 KB answer: stored (under maxBytesPerResponse with its item copy)
      const first = await stored(w.key);
      assert.equal(first.store, true);
      h.fake.behaviour = { usage: USAGE };
      const db = h.gw.services.storage.db;
      const itemRow = await db
        .selectFrom('stored_response_items')
        .select(['bytes', 'item_json'])
        .where('id', '=', first.output[0]!.id)
        .executeTakeFirstOrThrow();
      assert.equal(Number(itemRow.bytes), Buffer.byteLength(itemRow.item_json));
      assert.deepEqual(JSON.parse(itemRow.item_json), first.output[0]);
      const row = await db.selectFrom('stored_responses').select(['bytes', 'input_json', 'response_json']).where('id', '=', first.id).executeTakeFirstOrThrow();
      assert.equal(
        Number(row.bytes),
        Buffer.byteLength(row.input_json) + Buffer.byteLength(row.response_json) + Number(itemRow.bytes),
        'the per-wallet bound counts the item copies',
      );

      const limit = 4 * 1024 * 1024; // limits.chatBodyBytes, the default
      const refs = Math.ceil(limit / Number(itemRow.bytes)) + 1;
      const body = JSON.stringify({
        model: 'chat-small',
        store: false,
        input: [{ role: 'user', content: 'x' }, ...Array.from({ length: refs }, () => ({ type: 'item_reference', id: first.output[0]!.id }))],
      });
      const balance = await h.balance(w.account);
      h.fake.received.length = 0;
      const over = await fetch(`${h.gw.url}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body,
      });
      assert.equal(over.status, 413);
      const refusalBody = await over.json();
      assert.equal(refusalBody.error, 'PAYLOAD_TOO_LARGE'); // the body-limit 413's code
      const expanded = Buffer.byteLength(body) + refs * Number(itemRow.bytes);
      assert.equal(refusalBody.expanded_bytes, expanded);
      assert.match(
        refusalBody.message,
        new RegExp(`about ${expanded} bytes.*limit of ${limit} bytes \\(limits\\.chatBodyBytes\\).*fewer stored items, or start a new conversation`),
      );
      assert.equal(h.fake.received.length, 0);
      assert.deepEqual(await h.balance(w.account), balance, 'nothing reserved');
      // Under the bound the references resolve and go on to the reservation (one reference: answered).
      const one = await post(w.key, {
        store: false,
        input: [
          { role: 'user', content: 'x' },
          { type: 'item_reference', id: first.output[0]!.id },
        ],
      });
      assert.equal(one.status, 200);
      assert.deepEqual(h.fake.received[0]!.body.messages[1], { role: 'assistant', content: 'word '.repeat(3_000) });
    });

    test('pruning: a pass deletes batch after batch until one comes back short, and stops after the batch in hand once its time budget is spent', async () => {
      const db = h.gw.services.storage.db;
      const w = await h.wallet(FUNDS);
      const now = Date.now();
      const rows = Array.from({ length: 250 }, (_, i) => ({
        id: `resp_${String(i).padStart(32, 'e')}`,
        wallet: w.account.address.toLowerCase(),
        api_key_id: w.keyId,
        created_at: now - 7200_000,
        expires_at: now - 3600_000,
        bytes: 10,
        input_json: '[]',
        response_json: '{"output":[]}',
      }));
      await db.insertInto('stored_responses').values(rows).execute();
      assert.equal(await pruneExpiredResponses(db, now, { batch: 100, budgetMs: 0 }), 100, 'a spent budget: one batch');
      assert.equal(await pruneExpiredResponses(db, now, { batch: 100 }), 150, 'then batches until a short one');
      assert.equal(await pruneExpiredResponses(db, now, { batch: 100 }), 0);
    });

    // Last: it moves the clock past every response stored so far.
    test('an expired response is a 404 everywhere, and the pruning removes it and its items', async () => {
      const w = await h.wallet(FUNDS);
      const res = await stored(w.key);
      skew = TTL_SECONDS * 1000 + 1;
      try {
        assert.equal((await get(w.key, res.id)).status, 404);
        assert.equal((await post(w.key, { input: 'and?', previous_response_id: res.id })).status, 404);
        assert.equal((await post(w.key, { input: [{ type: 'item_reference', id: res.output[0]!.id }] })).status, 404);
        assert.equal((await get(w.key, res.id, 'DELETE')).status, 404);
        const db = h.gw.services.storage.db;
        assert.ok((await pruneExpiredResponses(db, Date.now() + skew)) >= 1);
        assert.equal((await db.selectFrom('stored_responses').select('id').where('id', '=', res.id).execute()).length, 0);
        assert.equal((await db.selectFrom('stored_response_items').select('id').where('response_id', '=', res.id).execute()).length, 0);
      } finally {
        // Back to real time: SIWE proofs (key creation) are checked against it.
        skew = 0;
      }
    });
  });
}
