import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import type { MatchedPayment } from '../../src/payments/match.ts';
import { creditPayment, findPayment, markFailed, markSubmitted, openPayment, releaseUnsent, type PaymentRow } from '../../src/payments/payment-store.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';

/**
 * The payment store's property (terms never change once recorded): the store driven through random sequences of open (first use,
 * replay, reopen, other terms under the same nonce) / fail / release / submit / front-run / credit,
 * with random terms, payers, nonces and token decimals, against a pure model of the chain. Whatever
 * the order, for every payer:
 *   credited micro-USDC = micro-USDC that reached payTo from that payer
 *                         − what arrived for an authorization whose recorded terms were others
 * (the second term is the rule "if the chain's amount differs from the recorded terms, nothing is
 * credited": such a row is failed and says why). At every step, credited ≤ arrived.
 * The real chain is used by payment-terms.test.ts; this one explores orders.
 */
const RUNS = { sqlite: 2_000, postgres: 2_000 } as const;
const NETWORK = 'eip155:31337';
const ASSET = '0x00000000000000000000000000000000000000a5';
const PAY_TO = '0x00000000000000000000000000000000000000b0';
const USDS = [1n, 2n, 10_000n];

let runCounter = 0;
const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');

/** A signed payload in the model: the true one (valid signature) or a junk one with any amount. */
interface Payload {
  auth: number; // index into the run's authorizations
  usd: bigint;
  sig: number; // 0: the payer's true signature
}

type Op = { kind: 'open'; payload: Payload } | { kind: 'fail' | 'release' | 'submit' | 'frontRun' | 'credit'; auth: number };

const payloadArb = (auths: number) => fc.record({ auth: fc.nat({ max: auths - 1 }), usd: fc.constantFrom(...USDS), sig: fc.nat({ max: 2 }) });

const runArb = fc.record({ auths: fc.integer({ min: 1, max: 3 }), payers: fc.integer({ min: 1, max: 2 }), decimals: fc.constantFrom(6, 18) }).chain((shape) =>
  fc.record({
    shape: fc.constant(shape),
    // The true amount each authorization was signed for.
    trueUsd: fc.array(fc.constantFrom(...USDS), { minLength: shape.auths, maxLength: shape.auths }),
    payerOf: fc.array(fc.nat({ max: shape.payers - 1 }), { minLength: shape.auths, maxLength: shape.auths }),
    ops: fc.array(
      fc.oneof(
        { weight: 4, arbitrary: payloadArb(shape.auths).map((payload): Op => ({ kind: 'open', payload })) },
        fc.record({ kind: fc.constantFrom('fail', 'release', 'submit', 'frontRun', 'credit'), auth: fc.nat({ max: shape.auths - 1 }) }) as fc.Arbitrary<Op>,
      ),
      { minLength: 1, maxLength: 14 },
    ),
  }),
);

type Run = typeof runArb extends fc.Arbitrary<infer T> ? T : never;

async function play(db: Storage['db'], run: Run): Promise<void> {
  const id = ++runCounter;
  const { decimals } = run.shape;
  const unit = 10n ** BigInt(decimals);
  const payers = Array.from({ length: run.shape.payers }, (_, i) => `0x${hex(id, 30)}${hex(i, 10)}`);
  const nonces = run.trueUsd.map((_, a) => `0x${hex(id, 56)}${hex(a, 8)}`);
  const validBefore = 2_000_000_000;

  // The chain: which authorizations were used, by which transaction, moving how much.
  const chain = new Map<number, { tx: string; atomic: bigint }>();
  const arrived = new Map<string, bigint>();
  const rows = new Map<number, { id: string; recorded: Payload }>();
  let txCounter = 0;

  const matched = (p: Payload): MatchedPayment => {
    const signature = `0x${hex(p.sig, 2).repeat(65)}`;
    const amount = (p.usd * unit).toString();
    const inner = {
      signature,
      authorization: {
        from: payers[run.payerOf[p.auth]!]!,
        to: PAY_TO,
        value: amount,
        validAfter: '0',
        validBefore: String(validBefore),
        nonce: nonces[p.auth]!,
      },
    };
    return {
      offer: { config: { network: NETWORK, asset: ASSET, transferMethod: 'eip3009', name: 'USDC', version: '2', decimals }, requirements: {} as never },
      payload: { x402Version: 2, accepted: {} as PaymentRequirements, payload: inner } as PaymentPayload,
      requirements: {} as PaymentRequirements,
      identity: {
        network: NETWORK,
        chainId: 31337,
        asset: ASSET,
        payer: inner.authorization.from,
        nonce: inner.authorization.nonce,
        method: 'eip3009',
        payTo: PAY_TO,
        amountAtomic: amount,
        validBefore,
      },
      digest: createHash('sha256').update(signature).digest('hex'),
    };
  };
  const isTrue = (p: Payload) => p.sig === 0 && p.usd === run.trueUsd[p.auth];
  const samePayload = (a: Payload, b: Payload) => a.sig === b.sig && a.usd === b.usd;
  const credited = async (payer: string) =>
    BigInt(
      (
        await db
          .selectFrom('ledger_entries')
          .select((eb) => eb.fn.coalesce(eb.fn.sum<number>('amount_usdc'), eb.lit(0)).as('s'))
          .where('wallet', '=', payer)
          .where('kind', '=', 'topup')
          .executeTakeFirstOrThrow()
      ).s,
    );
  const toMicro = (atomic: bigint) => atomic / 10n ** BigInt(decimals - 6);
  const settleOnChain = (auth: number) => {
    if (chain.has(auth)) return;
    const atomic = run.trueUsd[auth]! * unit;
    chain.set(auth, { tx: `0x${hex(id, 48)}${hex(++txCounter, 16)}`, atomic });
    const payer = payers[run.payerOf[auth]!]!;
    arrived.set(payer, (arrived.get(payer) ?? 0n) + toMicro(atomic));
  };
  /** What the settle path and the reconciler do once the chain shows the authorization used. */
  const creditFromChain = async (auth: number) => {
    const row = rows.get(auth);
    const used = chain.get(auth);
    if (row && used) await creditPayment(db, row.id, used.tx, used.atomic);
  };
  const open = async (p: Payload): Promise<PaymentRow | null> => {
    const before = rows.get(p.auth);
    const beforeRow = before ? await findPayment(db, before.id) : null;
    const result = await openPayment(db, matched(p), 0, Date.now());
    if (!before) {
      assert.equal(result.kind, 'claimed');
      rows.set(p.auth, { id: (result as { row: PaymentRow }).row.id, recorded: p });
      return (result as { row: PaymentRow }).row;
    }
    if (!samePayload(before.recorded, p)) {
      assert.equal(result.kind, 'conflict', 'other terms under a recorded nonce must be refused');
      return null;
    }
    // A failed attempt is claimed again, unless the chain used its authorization for another amount: that
    // payment stays failed with the amount named, never reopened.
    const reopens = beforeRow!.status === 'failed' && beforeRow!.onchain_amount_atomic === null;
    assert.equal(result.kind, reopens ? 'claimed' : 'existing');
    return (result as { row: PaymentRow }).row;
  };

  for (const op of run.ops) {
    const auth = op.kind === 'open' ? op.payload.auth : op.auth;
    const row = rows.get(auth);
    switch (op.kind) {
      case 'open':
        await open(op.payload);
        break;
      case 'fail':
        if (row) await markFailed(db, row.id, 'model: failed');
        break;
      case 'release':
        // The reconciler releases only what nothing on chain refers to.
        if (row && !chain.has(auth)) await releaseUnsent(db, await findPayment(db, row.id));
        break;
      case 'submit': {
        // Our relayer can send only a payload whose signature is valid, for a claimed attempt.
        if (!row || !isTrue(row.recorded) || (await findPayment(db, row.id)).status !== 'pending') break;
        settleOnChain(auth);
        await markSubmitted(db, row.id, chain.get(auth)!.tx);
        break;
      }
      case 'frontRun':
        settleOnChain(auth);
        break;
      case 'credit':
        await creditFromChain(auth);
        break;
    }
    for (const payer of payers) assert.ok((await credited(payer)) <= (arrived.get(payer) ?? 0n), `payer ${payer} credited more than arrived`);
  }

  // Drain: whoever holds each recorded payload sends it again, and the chain is asked once more;
  // authorizations used on chain but never sent to the gateway are sent now with their true payload.
  for (const auth of chain.keys()) {
    const row = rows.get(auth);
    await open(row ? row.recorded : { auth, usd: run.trueUsd[auth]!, sig: 0 });
    await creditFromChain(auth);
  }
  for (const payer of payers) {
    let stranded = 0n;
    for (const [auth, used] of chain) {
      const row = rows.get(auth)!;
      if (payers[run.payerOf[auth]!] !== payer || row.recorded.usd * unit === used.atomic) continue;
      stranded += toMicro(used.atomic);
      const stored = await findPayment(db, row.id);
      assert.equal(stored.status, 'failed');
      assert.match(stored.failure_reason ?? '', /reached payTo for this authorization .* nothing was credited/);
    }
    assert.equal(await credited(payer), (arrived.get(payer) ?? 0n) - stranded, `payer ${payer}: credited != arrived - stranded`);
  }
}

for (const engine of ENGINES) {
  describe(`payment store against a model of the chain (${engine})`, () => {
    let storage: Storage;
    before(async () => {
      storage = openStorage(await freshDatabaseUrl(engine), { poolSize: 4 });
      await migrateToLatest(storage);
    });
    after(() => storage?.close());

    test(`credited = arrived for every payer, over ${RUNS[engine]} random sequences`, async () => {
      await fc.assert(
        fc.asyncProperty(runArb, (run) => play(storage.db, run)),
        { numRuns: RUNS[engine] },
      );
      assert.deepEqual((await checkLedger(storage.db)).problems, []);
    });
  });
}
