import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { decodeMessagesRequest } from '../../src/protocols/anthropic-messages/decode-request.ts';
import { checkForwardedFields } from '../../src/protocols/openai-chat/request-fields.ts';

/**
 * "Unrecognized request argument" errors send the client to docs/api.md#forwarded-fields
 * (not the README, which lists neither set). That section lists the
 * fields each protocol forwards: these checks keep the list and the code in step.
 */
const API = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'api.md'), 'utf8');
const section = API.slice(API.indexOf('\n## Forwarded fields\n'), API.indexOf('\n## Billing\n'));
const names = (text: string) => [...text.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!);
const unrecognized = (fn: () => unknown): string | null => {
  try {
    fn();
    return null;
  } catch (err) {
    const message = (err as Error).message;
    return /^Unrecognized request argument/.test(message) ? message : null;
  }
};

describe('docs/api.md#forwarded-fields lists what the gateway forwards', () => {
  test('the section exists, and both errors point to it', () => {
    assert.ok(section.length > 100);
    assert.match(unrecognized(() => checkForwardedFields({ foo: 1 }, new Set())) ?? '', /listed in docs\/api\.md#forwarded-fields/);
    assert.match(
      unrecognized(() => decodeMessagesRequest({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }], foo: 1 })) ?? '',
      /listed in docs\/api\.md#forwarded-fields/,
    );
  });

  test('every Messages field it lists is forwarded (top_k as a configured extension), and others are refused', () => {
    const paragraph = section.slice(section.indexOf('On `POST /v1/messages`'));
    const listed = names(paragraph.slice(0, paragraph.indexOf('Any other field')));
    for (const f of ['model', 'messages', 'system', 'max_tokens', 'stop_sequences', 'tools', 'thinking', 'metadata', 'top_k']) assert.ok(listed.includes(f), f);
    // Plausible values, so that the request passes its other checks and reaches the field allowlist.
    const values: Record<string, unknown> = {
      system: 'Be brief.',
      stop_sequences: ['END'],
      stream: false,
      temperature: 0.5,
      top_p: 0.9,
      top_k: 3,
      tools: [],
      tool_choice: { type: 'auto' },
      thinking: { type: 'disabled' },
      metadata: { user_id: 'u' },
      service_tier: 'auto',
    };
    const base = { model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] };
    assert.ok(
      unrecognized(() => decodeMessagesRequest({ ...base, foo: 1 })),
      'an unlisted field is refused',
    );
    for (const field of listed.filter((f) => !(f in base) && !['auto', 'standard_only'].includes(f))) {
      assert.ok(field in values, `${field} is listed: give it a value here`);
      assert.equal(
        unrecognized(() => decodeMessagesRequest({ ...base, [field]: values[field] }, new Set(['top_k']))),
        null,
        field,
      );
    }
    assert.ok(
      unrecognized(() => decodeMessagesRequest({ ...base, top_k: 3 })),
      'top_k without extraFields',
    );
  });

  test('every chat-completions field it lists is forwarded', () => {
    const listed = names(section.slice(0, section.indexOf('Any other field')));
    assert.ok(listed.length > 25, listed.join());
    for (const field of listed.filter((f) => !['auto', 'default', 'text', 'false'].includes(f))) {
      assert.equal(
        unrecognized(() =>
          checkForwardedFields({ [field]: field === 'store' ? false : field === 'service_tier' ? 'auto' : field === 'modalities' ? ['text'] : 1 }, new Set()),
        ),
        null,
        field,
      );
    }
  });
});
