import assert from 'node:assert/strict';
import type { PrivateKeyAccount } from 'viem/accounts';
import type { ChatHarness } from './chat-harness.ts';

/** The request_usage rows of one API key, oldest first as written. */
export const usageRowsOf = (h: ChatHarness, keyId: number) =>
  h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', keyId).execute();

/** The key's first usage row, once a stream (or its drain after a disconnect) has been billed. */
export async function waitForUsageRow(h: ChatHarness, keyId: number) {
  for (let i = 0; i < 200; i++) {
    const rows = await usageRowsOf(h, keyId);
    if (rows.length) return rows[0]!;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('no usage row');
}

/** A failed request left the wallet as funded: nothing locked, one row with `status` and no charge. */
export async function expectNothingCharged(h: ChatHarness, w: { account: PrivateKeyAccount; keyId: number }, funds: number, status = 'upstream_error') {
  assert.deepEqual(await h.balance(w.account), { balance_usdc: funds, locked_usdc: 0, available_usdc: funds });
  const rows = await usageRowsOf(h, w.keyId);
  assert.equal(rows.length, 1);
  assert.equal(rows[0]!.status, status);
  assert.equal(Number(rows[0]!.charged_usdc), 0);
}
