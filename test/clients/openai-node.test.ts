import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import OpenAI from 'openai';
import { ERROR_CASES, MESSAGES, errorFormatSuite } from '../support/error-cases.ts';
import { rejection } from '../support/openai-rejection.ts';

/** openai-node's class for each status (it picks the class from the status alone). */
const CLASS_BY_STATUS = {
  400: OpenAI.BadRequestError,
  401: OpenAI.AuthenticationError,
  402: OpenAI.APIError,
  429: OpenAI.RateLimitError,
  502: OpenAI.InternalServerError,
};
const TYPE_BY_STATUS = { 400: 'invalid_request_error', 401: 'authentication_error', 402: 'insufficient_quota', 429: 'rate_limit_error', 502: 'api_error' };

for (const format of ['spec', 'openai'] as const) {
  describe(`openai-node renders errors.format: ${format}`, () => {
    const harness = errorFormatSuite(format);

    for (const c of ERROR_CASES) {
      test(`${c.status} ${c.code}`, async () => {
        const h = harness();
        const { key, model } = await c.prepare(h);
        const err = await rejection(h.client(key).chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }));
        assert.equal(err.status, c.status);
        assert.ok(err instanceof CLASS_BY_STATUS[c.status], err.constructor.name);
        assert.match(err.requestID ?? '', /^[0-9a-f-]{36}$/);
        if (format === 'spec') {
          // All openai-node can show of the spec shape: the code, quoted, as the message.
          assert.equal(err.message, `${c.status} "${c.code}"`);
          assert.equal(err.error, c.code);
          assert.deepEqual([err.code, err.type, err.param], [undefined, undefined, undefined]);
          return;
        }
        assert.match(err.message.slice(`${c.status} `.length), MESSAGES[c.status]);
        assert.ok(err.message.startsWith(`${c.status} `));
        assert.equal(err.code, c.code);
        assert.equal(err.type, TYPE_BY_STATUS[c.status]);
        assert.equal(err.param, c.status === 400 ? 'model' : null);
        const body = err.error as Record<string, unknown>;
        if (c.status === 402) {
          assert.equal(body.balance_usdc, 10, 'balance_usdc is reachable on err.error');
          assert.ok((body.required_usdc as number) > 10);
        }
        if (c.status === 400) assert.deepEqual(body.candidates, ['fake/shared-name', 'other/shared-name']);
        if (c.status === 429) assert.equal(typeof body.retry_after_ms, 'number');
      });
    }

    test('models.retrieve by full id and by unique bare name; unknown and ambiguous ids are NotFoundError', async () => {
      const h = harness();
      const client = h.client('sk-unused');
      const full = await client.models.retrieve('fake/chat-small');
      const listed = (await client.models.list()).data.find((m) => m.id === 'fake/chat-small');
      assert.deepEqual(full, listed, 'the same object /v1/models lists, pricing included');
      assert.equal(full.object, 'model');
      assert.equal(full.owned_by, 'fake');
      assert.equal((full as any).promptPricePer1MTokens, 1.2);
      assert.deepEqual(await client.models.retrieve('chat-small'), full);

      const unknown = await rejection(client.models.retrieve('nope/nothing'));
      assert.ok(unknown instanceof OpenAI.NotFoundError);
      const ambiguous = await rejection(client.models.retrieve('shared-name'));
      assert.ok(ambiguous instanceof OpenAI.NotFoundError);
      if (format === 'openai') {
        assert.equal(unknown.message, '404 unknown model "nope/nothing"; GET /v1/models lists the available ones');
        assert.equal(unknown.type, 'not_found_error');
        assert.equal(ambiguous.message, '404 model "shared-name" is offered by several providers; ask for one of fake/shared-name, other/shared-name');
        assert.deepEqual((ambiguous.error as any).candidates, ['fake/shared-name', 'other/shared-name']);
      } else {
        assert.equal(unknown.message, '404 "NOT_FOUND"');
      }
    });

    test('a provider failure inside a stream is thrown with its message, whatever the format', async () => {
      const h = harness();
      const w = await h.wallet(1_000_000);
      h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 }, cutAfterChunks: 2 };
      const stream = await h.client(w.key).chat.completions.create({ model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true });
      const err = await rejection(
        (async () => {
          for await (const _ of stream);
        })(),
      );
      assert.equal(err.message, 'the provider closed the connection; nothing was charged');
      assert.equal(err.type, 'upstream_error');
      assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
    });
  });
}
