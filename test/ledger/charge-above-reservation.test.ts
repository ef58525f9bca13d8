import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { findChargesAboveReservation } from '../../src/ledger/over-reservation.ts';
import type { Metrics } from '../../src/metrics/metrics.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { runTollgate } from '../support/cli.ts';
import { ENGINES, tempDir } from '../support/engines.ts';

/**
 * Attacker: a provider (or a bound that missed
 * an input) reporting more usage than the reservation allowed. The charge is still taken from the
 * wallet's free balance, but it must not pass silently: error log with the request id, a metric,
 * and a finding in `tollgate admin ledger-check`. The charged-USDC metric counts what was charged,
 * not what was asked.
 */

// The provider claims a million prompt tokens for "hi".
const LYING_USAGE = { prompt_tokens: 1_000_000, completion_tokens: 5 };
const CHARGE = 1_200_012; // 1,000,000 × 1.2 + 5 × 2.4 micro-USDC (chat-small, 20% markup)

async function sum(counter: Metrics['chargedUsdc']): Promise<number> {
  return (await counter.get()).values.reduce((total, v) => total + v.value, 0);
}

async function ask(h: ChatHarness, key: string) {
  return fetch(`${h.gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }),
  });
}

/** The gateway's log lines at error level (pino level 50) as objects. */
function errorLines(h: ChatHarness): Array<Record<string, unknown>> {
  return h.gw
    .logs()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.level === 50);
}

for (const engine of ENGINES) {
  describe(`a charge above the reservation (${engine})`, () => {
    test('is charged from the free balance, logged at error level with the request id, counted, and listed by ledger-check', async () => {
      const h = await startChatHarness(engine);
      try {
        const funds = 5_000_000;
        const w = await h.wallet(funds);
        h.fake.behaviour = { usage: LYING_USAGE };
        const res = await ask(h, w.key);
        assert.equal(res.status, 200, await res.clone().text());
        const requestId = res.headers.get('x-request-id')!;
        assert.equal(res.headers.get('x-tollgate-charged-usdc'), String(CHARGE));

        const db = h.gw.services.storage.db;
        const reservation = await db.selectFrom('reservations').selectAll().where('request_id', '=', requestId).executeTakeFirstOrThrow();
        const reserved = Number(reservation.amount_usdc);
        assert.ok(reserved < CHARGE, `the reservation (${reserved}) is the bound the provider broke`);
        assert.equal(Number(reservation.charged_usdc), CHARGE);
        assert.equal((await h.balance(w.account)).balance_usdc, funds - CHARGE);

        const logged = errorLines(h).filter((l) => l.reqId === requestId);
        assert.equal(logged.length, 1, 'one error-level line names the request');
        assert.match(String(logged[0]!.msg), /above the reservation/);
        assert.equal(logged[0]!.reservedUsdc, reserved);
        assert.equal(logged[0]!.chargeUsdc, CHARGE);

        const m = h.gw.services.metrics;
        assert.equal(await sum(m.overReservation), 1);
        assert.equal(await sum(m.overReservationUsdc), CHARGE - reserved);
        assert.equal(await sum(m.chargedUsdc), CHARGE);

        // The books balance (the wallet could pay), so it is a finding, not a failed invariant.
        const ledger = await checkLedger(db);
        assert.deepEqual(ledger.problems, []);
        assert.equal(ledger.ok, true);
        assert.deepEqual(await findChargesAboveReservation(db), [
          { requestId, wallet: w.account.address.toLowerCase(), reservedUsdc: reserved, chargedUsdc: CHARGE },
        ]);
        assert.equal(ledger.findings.length, 1);
        assert.match(ledger.findings[0]!, new RegExp(`request ${requestId} .*charged ${CHARGE} above its reservation of ${reserved}`));

        const configPath = join(tempDir(), 'tollgate.yaml');
        writeFileSync(configPath, `database:\n  url: "${h.gw.config.database.url}"\nserver:\n  publicUrl: http://gateway.test\n`);
        const cli = await runTollgate(['--config', configPath, 'admin', 'ledger-check']);
        assert.equal(cli.code, 0, cli.stdout + cli.stderr);
        assert.match(cli.stdout, new RegExp(`findings[^\\n]*\\n  request ${requestId} `));
        assert.match(cli.stdout, /ledger OK/);
      } finally {
        await h.stop();
      }
    });

    test('a wallet that cannot cover it pays its balance, and the charged metric counts only that', async () => {
      const h = await startChatHarness(engine);
      try {
        const funds = 100_000;
        const w = await h.wallet(funds);
        h.fake.behaviour = { usage: LYING_USAGE };
        const res = await ask(h, w.key);
        assert.equal(res.status, 200, await res.clone().text());
        assert.equal(res.headers.get('x-tollgate-charged-usdc'), String(funds));
        assert.deepEqual(await h.balance(w.account), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });

        const m = h.gw.services.metrics;
        // The metric counts the 100,000 charged, not the 1,200,012 asked for.
        assert.equal(await sum(m.chargedUsdc), funds);
        assert.equal(await sum(m.overReservation), 1);
        const ledger = await checkLedger(h.gw.services.storage.db);
        assert.deepEqual(ledger.problems, []);
        assert.equal(ledger.chargesUsdc, await sum(m.chargedUsdc));
        assert.equal(ledger.findings.length, 1);
      } finally {
        await h.stop();
      }
    });
  });
}
