import assert from 'node:assert/strict';
import fc from 'fast-check';
import { adjustBalance } from '../../../src/ledger/movements.ts';
import { sweepExpiredReservations } from '../../../src/ledger/operations/expire.ts';
import { finishReservation } from '../../../src/ledger/operations/finish.ts';
import { lateCharge } from '../../../src/ledger/operations/late-charge.ts';
import { tryReserve } from '../../../src/ledger/operations/reserve.ts';
import { SPEND_PERIODS, type SpendPeriod } from '../../../src/ledger/spend-periods.ts';
import { updateKeyLimits } from '../../../src/keys/key-limits.ts';
import { closeSettled, fixCharge, holdMaximum, markUnsettled, writeOff } from '../../../src/payments/upto/upto-store.ts';
import type { PaymentPayload } from '@x402/core/types';
import * as model from './model.ts';
import type { LedgerModel } from './model.ts';
import { assertAgrees, reopen, usageOf, type World } from './world.ts';

/**
 * The steps of the ledger simulation, each the product's own function on the real database beside
 * the model's rule, followed by the comparison of the two (world.ts, assertAgrees).
 */
type Act = (m: LedgerModel, w: World) => Promise<string>;

class Step implements fc.AsyncCommand<LedgerModel, World> {
  private done = '';
  constructor(
    private readonly label: string,
    private readonly act: Act,
    private readonly when: (m: LedgerModel) => boolean = () => true,
  ) {}
  check(m: Readonly<LedgerModel>): boolean {
    return this.when(m as LedgerModel);
  }
  async run(m: LedgerModel, w: World): Promise<void> {
    this.done = await this.act(m, w);
    await assertAgrees(m, w);
  }
  toString(): string {
    return this.done ? `${this.label} → ${this.done}` : this.label;
  }
}

const PLAIN_KEYS = 3; // keys 0..2 are API keys of the two plain wallets; key 3 is the upto hold wallet's
const pick = <T>(list: T[], i: number): T => list[i % list.length]!;
const finished = (m: LedgerModel) => m.reservations.filter((r) => r.status !== 'pending');
/** An even choice picks among the open reservations (when there are any), an odd one among all: most finishes act, some repeat. */
const choose = (m: LedgerModel, which: number) => {
  const open = m.reservations.filter((r) => r.status === 'pending');
  return pick(which % 2 === 0 && open.length > 0 ? open : m.reservations, which >> 1);
};
const amount = fc.integer({ min: 1, max: 2_500 });

function reserveStep(key: number, amountUsdc: number): Step {
  return new Step(`reserve ${amountUsdc} on key ${key}`, async (m, w) => {
    const requestId = `req-${m.reservations.length + 1}`;
    const expected = model.reserve(m, key, requestId, amountUsdc);
    const wallet = w.wallets[m.keys[key]!.wallet]!;
    const got = await tryReserve(w.storage, { wallet, apiKeyId: w.keys[key]!, requestId, amountUsdc, leaseMs: model.LEASE_MS }, m.now);
    assert.deepEqual(got.ok ? got : { ok: false, refused: got.refused }, expected);
    return got.ok ? requestId : `refused (${got.refused})`;
  });
}

function finishStep(which: number, asked: number, verb: string): Step {
  return new Step(
    `${verb} reservation #${which} asking ${asked}`,
    async (m, w) => {
      const r = choose(m, which);
      const expected = model.finish(m, r, asked);
      const got = await finishReservation(w.storage, r.requestId, asked, usageOf(w, m, r.requestId, r.key), m.now);
      assert.deepEqual({ applied: got.applied, charged: got.chargedUsdc }, expected);
      return `${r.requestId}: ${got.applied ? `charged ${got.chargedUsdc}` : 'already finished'}`;
    },
    (m) => m.reservations.length > 0,
  );
}

function lateStep(which: number, asked: number): Step {
  return new Step(
    `late charge of ${asked} on finished reservation #${which}`,
    async (m, w) => {
      // An even choice picks among the swept ones (no usage row yet) when there are any: those a late charge bills.
      const swept = finished(m).filter((r) => !r.billed);
      const r = pick(which % 2 === 0 && swept.length > 0 ? swept : finished(m), which >> 1);
      const expected = model.lateCharge(m, r, asked);
      const bill = { requestId: r.requestId, wallet: w.wallets[m.keys[r.key]!.wallet]!, chargeUsdc: asked, usage: usageOf(w, m, r.requestId, r.key) };
      const got = await lateCharge(w.storage, bill, m.now);
      assert.deepEqual(got.kind === 'late' ? { kind: 'late', charged: got.outcome.chargedUsdc } : got, expected);
      return `${r.requestId}: ${got.kind}`;
    },
    (m) => finished(m).length > 0,
  );
}

function sweepStep(advanceMs: number): Step {
  return new Step(`${advanceMs} ms pass then the sweeper`, async (m, w) => {
    m.now += advanceMs;
    const expected = model.sweep(m);
    assert.equal(await sweepExpiredReservations(w.storage.db, m.now), expected);
    return `${expected} swept`;
  });
}

function creditStep(wallet: number, amountUsdc: number): Step {
  return new Step(`adjust wallet ${wallet} by ${amountUsdc}`, async (m, w) => {
    const applied = model.adjust(m, wallet, amountUsdc);
    const got = await adjustBalance(w.storage.db, { wallet: w.wallets[wallet]!, amountUsdc }).then(
      () => true,
      () => false,
    );
    assert.equal(got, applied, `an adjustment of ${amountUsdc} ${applied ? 'refused' : 'applied'}`);
    return applied ? 'applied' : 'refused';
  });
}

function keyLimitStep(key: number, limit: number | null, period: SpendPeriod): Step {
  return new Step(`key ${key} limit ${limit ?? 'none'} per ${period}`, async (m, w) => {
    const got = await updateKeyLimits(w.storage.db, w.keys[key]!, null, { spend_limit_usdc: limit, spend_limit_period: limit === null ? null : period }, true);
    assert.equal(got.ok, true);
    Object.assign(m.keys[key]!, { limit, period: limit === null ? null : period });
    return 'set';
  });
}

function uptoHoldStep(max: number): Step {
  return new Step(`upto hold of ${max}`, async (m, w) => {
    const id = `upto-${++m.payments}`;
    await w.storage.db
      .insertInto('payments')
      .values({
        id,
        network: 'eip155:84532',
        asset: '0xusdc',
        payer: w.payer,
        nonce: id,
        transfer_method: 'permit2',
        pay_to: '0xgateway',
        amount_atomic: String(max),
        amount_usdc: max,
        payload_digest: id,
        terms_digest: id,
        token_decimals: 6,
        onchain_amount_atomic: null,
        valid_before: m.now / 1000 + 300,
        from_block: 0,
        status: 'pending',
        state: 'pending',
        tx_hash: null,
        failure_reason: null,
        balance_after_usdc: null,
        locked_after_usdc: null,
        created_at: m.now,
        updated_at: m.now,
        credited_at: null,
        purpose: 'chat',
      })
      .execute();
    const got = await holdMaximum(w.storage.db, id, { x402Version: 2 } as unknown as PaymentPayload, m.now);
    if (m.upto) {
      assert.equal(got.kind, 'busy');
      return 'busy';
    }
    assert.equal(got.kind, 'held');
    m.upto = { paymentId: id, max, state: 'holding', charge: 0 };
    model.holdWallet(m).balance += max;
    return id;
  });
}

const uptoFixStep = () =>
  new Step(
    'upto fix (charge fixed and rest released)',
    async (m, w) => {
      const expected = model.fixCharge(m);
      assert.equal(await fixCharge(w.storage.db, m.upto!.paymentId, m.now), expected.outcome);
      return expected.outcome === 'fixed' ? `charge ${expected.charge}` : expected.outcome;
    },
    (m) => m.upto !== null,
  );

function uptoCloseStep(paid: boolean): Step {
  return new Step(
    `upto payment ${paid ? 'settled on chain' : 'unsettled and written off'}`,
    async (m, w) => {
      const { paymentId, charge } = m.upto!;
      if (paid) await closeSettled(w.storage.db, paymentId, BigInt(charge), charge ? `0x${paymentId}` : null, m.now);
      else {
        assert.equal(await markUnsettled(w.storage.db, paymentId, 'simulated refusal', m.now), true);
        assert.equal(await writeOff(w.storage.db, paymentId, 'simulation', m.now), true);
      }
      m.upto = null;
      return paymentId;
    },
    (m) => m.upto?.state === 'settling',
  );
}

/** A crash: the process dies with reservations in flight; the restarted gateway migrates and its sweeper runs at start. */
function crashStep(downMs: number): Step {
  return new Step(`crash then restart ${downMs} ms later`, async (m, w) => {
    await reopen(w);
    m.now += downMs;
    const expected = model.sweep(m);
    assert.equal(await sweepExpiredReservations(w.storage.db, m.now), expected);
    return `${expected} voided at start`;
  });
}

const weighted = (weight: number, arbitrary: fc.Arbitrary<Step>) => ({ weight, arbitrary });
const charge = fc.integer({ min: 0, max: 4_000 });

/** One arbitrary of weighted steps: reserves and finishes most often, so sequences build up open reservations to finish, sweep and crash on. */
export const ledgerCommands = [
  fc.oneof(
    weighted(
      5,
      fc.tuple(fc.integer({ min: 0, max: PLAIN_KEYS }), amount).map(([k, a]) => reserveStep(k, a)),
    ),
    weighted(
      3,
      fc.tuple(fc.nat(), charge).map(([i, c]) => finishStep(i, c, 'settle')),
    ),
    weighted(
      1,
      fc.nat().map((i) => finishStep(i, 0, 'void')),
    ),
    weighted(
      2,
      fc.tuple(fc.nat(), charge).map(([i, c]) => lateStep(i, c)),
    ),
    weighted(2, fc.integer({ min: 0, max: 2 * model.LEASE_MS }).map(sweepStep)),
    weighted(1, fc.integer({ min: 0, max: 6 * 3_600_000 }).map(sweepStep)),
    weighted(
      2,
      fc
        .tuple(
          fc.integer({ min: 0, max: 1 }),
          fc.integer({ min: -3_000, max: 3_000 }).filter((a) => a !== 0),
        )
        .map(([wl, a]) => creditStep(wl, a)),
    ),
    weighted(
      1,
      fc
        .tuple(fc.integer({ min: 0, max: PLAIN_KEYS - 1 }), fc.option(fc.integer({ min: 0, max: 2_000 })), fc.constantFrom<SpendPeriod>(...SPEND_PERIODS))
        .map(([k, l, p]) => keyLimitStep(k, l, p)),
    ),
    weighted(1, amount.map(uptoHoldStep)),
    weighted(1, fc.constant(null).map(uptoFixStep)),
    weighted(2, fc.boolean().map(uptoCloseStep)),
    weighted(1, fc.integer({ min: 0, max: 2 * model.LEASE_MS }).map(crashStep)),
  ),
];
