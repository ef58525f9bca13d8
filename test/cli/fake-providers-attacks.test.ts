import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parseConfig } from '../../src/config/load.ts';
import { fakeProvidersRefusal } from '../../src/fake-providers/built-in.ts';
import { fakeProvidersDatabaseRefusal } from '../../src/fake-providers/database-refusal.ts';
import { applyMovement } from '../../src/ledger/movements.ts';
import { ledgerReference } from '../../src/payments/payment-store.ts';
import { openStorage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { call } from '../support/gateway.ts';
import { startTollgateProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { newAccount, siweProof } from '../support/siwe.ts';
import { until } from '../support/until.ts';

const RELAYER = { TOLLGATE_RELAYER_KEY: `0x${'11'.repeat(32)}` };
const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const offers = (network: string, chainId: string, name?: string) => ({
  chains: { [chainId]: { rpcUrl: 'http://127.0.0.1:9', ...(name ? { name } : {}) } },
  topup: {
    payTo: '0x000000000000000000000000000000000000dEaD',
    offers: [{ network, asset: BASE_USDC, transferMethod: 'eip3009', name: 'USD Coin', version: '2' }],
  },
});

/** The addresses listening on `port` (hex, as /proc/net/tcp{,6} write them). */
function listeners(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((f) =>
    readFileSync(f, 'utf8')
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .filter((cols) => cols[1]?.endsWith(`:${hexPort}`) && cols[3] === '0A')
      .map((cols) => cols[1]!.split(':')[0]!),
  );
}

describe('attack: --fake-providers and real money, reachability', () => {
  test('a real chain spelled another way (leading zero, a testnet name) is still refused (held)', () => {
    assert.match(fakeProvidersRefusal(parseConfig(offers('eip155:08453', '08453'), RELAYER), {}) ?? '', /real money could buy canned answers/);
    assert.match(fakeProvidersRefusal(parseConfig(offers('eip155:8453', '8453', 'Base Sepolia'), RELAYER), {}) ?? '', /real money/);
  });

  test('a PostgreSQL database (what production instances share) is refused; a new SQLite file is not', async () => {
    assert.match((await fakeProvidersDatabaseRefusal('postgres://127.0.0.1:9/tollgate')) ?? '', /PostgreSQL/);
    assert.equal(await fakeProvidersDatabaseRefusal(`sqlite:${join(tmpdir(), 'tollgate-fake-none', 'new.db')}`), null);
  });

  test('the built-in fakes listen on 127.0.0.1 only, and answer canned text there (held)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-fake-reach-'));
    let gateway: GatewayProcess | undefined;
    try {
      gateway = await startTollgateProcess(['serve', '--fake-providers'], { database: { url: `sqlite:${join(dir, 'tollgate.db')}` } });
      // The banner goes to stderr, the listening line to stdout: the two pipes can be read in either order.
      await until(() => gateway!.output().includes('fake providers on'), 'the fake providers banner');
      const urls = [...gateway.output().matchAll(/fake providers on (http:\/\/[^ ]+) and (http:\/\/[^ ]+) serve/g)].flatMap((m) => [m[1]!, m[2]!]);
      assert.equal(urls.length, 2, gateway.output());
      for (const url of urls) {
        const { hostname, port } = new URL(url);
        assert.equal(hostname, '127.0.0.1');
        assert.deepEqual(listeners(Number(port)), ['0100007F'], `who listens on ${port}`);
      }
      const direct = await call(urls[0]!.replace(/\/$/, ''), 'POST', '/chat/completions', {
        model: 'canned-chat',
        messages: [{ role: 'user', content: 'hi' }],
      });
      assert.match(direct.text, /canned answer/);
    } finally {
      await gateway?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a database holding balances paid on a real chain (a production database, its offers removed) is refused', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-fake-realdb-'));
    const database = { url: `sqlite:${join(dir, 'tollgate.db')}` };
    const storage = openStorage(database.url);
    let gateway: GatewayProcess | undefined;
    try {
      await migrateToLatest(storage);
      const owner = newAccount();
      const id = 'real-base-topup';
      const now = Date.now();
      await storage.db.transaction().execute(async (trx) => {
        await trx
          .insertInto('payments')
          .values({
            id,
            network: 'eip155:8453',
            asset: BASE_USDC,
            payer: owner.address.toLowerCase(),
            nonce: `0x${'01'.repeat(32)}`,
            transfer_method: 'eip3009',
            pay_to: '0x000000000000000000000000000000000000dead',
            amount_atomic: '5000000',
            amount_usdc: 5_000_000,
            payload_digest: 'd',
            valid_before: 0,
            from_block: 1,
            status: 'credited',
            tx_hash: `0x${'ab'.repeat(32)}`,
            token_decimals: 6,
            onchain_amount_atomic: '5000000',
            created_at: now,
            updated_at: now,
            credited_at: now,
          } as never)
          .execute();
        await applyMovement(
          trx,
          { wallet: owner.address, kind: 'topup', amountUsdc: 5_000_000, reference: ledgerReference(id), note: 'x402 eip155:8453' },
          now,
        );
      });

      gateway = await startTollgateProcess(['serve', '--fake-providers'], { database, rateLimits: { chat: { perMinute: 100 } } }).catch(() => undefined);
      if (!gateway) {
        // Refused at start, as the test asks, and for that reason.
        assert.match((await fakeProvidersDatabaseRefusal(database.url)) ?? '', /balances paid on eip155:8453/);
        return;
      }
      const created = await call(gateway.url, 'POST', '/v1/auth/keys', await siweProof(owner, { action: 'create-key' }));
      assert.equal(created.status, 201, created.text);
      const chat = await call(
        gateway.url,
        'POST',
        '/v1/chat/completions',
        { model: 'fake/canned-chat', messages: [{ role: 'user', content: 'hi' }] },
        {
          authorization: `Bearer ${created.body.key}`,
        },
      );
      const charged = await storage.db.selectFrom('request_usage').select('charged_usdc').execute();
      await assertLedgerConsistent(storage.db);
      assert.fail(`started beside a balance paid on eip155:8453 and sold a canned answer for it: ${chat.status}, charged ${JSON.stringify(charged)}`);
    } finally {
      await gateway?.stop();
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
