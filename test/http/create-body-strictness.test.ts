import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { createKeyProof, newAccount } from '../support/siwe.ts';

/**
 * PATCH refuses a misspelt limit field ("the owner would believe a limit was set"); POST
 * /v1/auth/keys must too, not drop it and create a key with no limit.
 */
describe('POST /v1/auth/keys refuses a misspelt limit field instead of creating an unlimited key', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  after(() => h.stop());

  for (const typo of [
    { spend_limit_usd: 1_000 },
    { spend_limit: 1_000 },
    { model: ['fake/chat-small'] },
    { allowed_models: ['fake/chat-small'] },
    { expires: '2030-01-01' },
    { expiresAt: '2030-01-01' },
  ]) {
    test(`${Object.keys(typo)[0]}: refused with 400, no key (not an unlimited key)`, async () => {
      const owner = newAccount();
      const res = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(owner)), label: 'for a script', ...typo });
      const row = await h.gw.services.storage.db
        .selectFrom('api_keys')
        .select(['spend_limit_usdc', 'allowed_models', 'expires_at'])
        .where('wallet', '=', owner.address.toLowerCase())
        .executeTakeFirst();
      assert.equal(res.status, 400, `${res.status}: created ${JSON.stringify(row)} (${res.text.slice(0, 200)})`);
      assert.equal(row, undefined);
    });
  }
});
