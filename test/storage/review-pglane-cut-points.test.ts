import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { getBalance } from '../../src/ledger/balances.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { CommitOutcomeUnknown, NotCommitted } from '../../src/storage/commit-outcome.ts';
import type { Storage } from '../../src/storage/database.ts';
import { laneCutProxy, ledgerWithUnlimitedKey } from '../support/cut-lane-proxy.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

/** Where the server's answers are cut, in bytes: inside the start-up, then across the first batches' answers. */
/** The pool's connect cut in the start-up: nothing of the batch was written; the driver's error reaches callers as it is. */
const CONNECT_CUT = 'Connection terminated unexpectedly';
const CUTS = Array.from({ length: 29 }, (_, i) => Math.round(300 * 1.2 ** i));

type Told = 'ok' | 'unknown' | 'not committed' | 'poison' | string;
interface Sent {
  kind: 'reserve' | 'finish' | 'mark' | 'mark-read-first' | 'mark-late-commit' | 'poison';
  id: string;
  told: Told;
}

const toldOf = (e: unknown): Told =>
  e instanceof CommitOutcomeUnknown ? 'unknown' : e instanceof NotCommitted ? 'not committed' : e instanceof Error ? e.message : String(e);

/**
 * The lane's connection cut at each point of the server's answers, over a backlog that mixes every kind of unit
 * the lane runs: one-statement reserves and finishes (COMMIT pipelined with them), one-statement units whose
 * COMMIT waits for their answers, units that read before they write (a run of their own), and units that
 * throw after their statement (the batch rolls back, its units run again alone). What each caller was told
 * must be what the database holds: told committed, it is there; told not committed, nothing of it is; only
 * an unknown outcome may be either; and a unit that threw never commits.
 */
describe('attack: the pipelined lane cut at each point of its answers, with every kind of unit in flight', () => {
  let url: string;
  let s: Storage;
  before(async () => {
    ({ url, s } = await ledgerWithUnlimitedKey());
    await sql`create table cut_marks (id text primary key)`.execute(s.db);
  });
  after(() => s.close());

  let n = 0;
  const id = () => `cut-${++n}-${randomBytes(4).toString('hex')}`;

  const cutLane = (answerBytes: number) => laneCutProxy(url, s.db, { answerBytes });

  const mark = (tx: { run(sql: string, p: unknown[]): Promise<number> }, markId: string) => tx.run('insert into cut_marks (id) values (?)', [markId]);

  /** Submits every kind of unit, interleaved over three wallets, in one turn of the event loop. */
  async function mixedBacklog(storage: Storage, wallets: string[], pending: string[]): Promise<Sent[]> {
    const sent: Promise<Sent>[] = [];
    const record = (kind: Sent['kind'], unitId: string, p: Promise<unknown>) =>
      sent.push(
        p.then(
          () => ({ kind, id: unitId, told: 'ok' }),
          (e: unknown) => ({ kind, id: unitId, told: toldOf(e) }),
        ),
      );
    for (let i = 0; i < 360; i++) {
      const wallet = wallets[i % wallets.length]!;
      const unitId = id();
      if (i % 4 === 1 && pending.length > 0) {
        const requestId = pending.pop()!;
        record('finish', requestId, finishReservation(storage, requestId, 3, usageRecord(requestId, wallet)));
      } else if (i % 29 === 3) {
        record(
          'poison',
          unitId,
          storage.writeUnit(async (tx) => (await mark(tx, unitId), Promise.reject(new Error('poison'))), { wallet }),
        );
      } else if (i % 17 === 2) {
        record(
          'mark-read-first',
          unitId,
          storage.writeUnit(async (tx) => (await tx.get('select 1 from cut_marks where id = ?', [unitId]), mark(tx, unitId)), { wallet }),
        );
      } else if (i % 11 === 4) {
        record(
          'mark-late-commit',
          unitId,
          storage.writeUnit((tx) => mark(tx, unitId), { wallet, oneStatement: true }),
        );
      } else if (i % 7 === 6) {
        record(
          'mark',
          unitId,
          storage.writeUnit((tx) => mark(tx, unitId), { wallet, oneStatement: true, nothingAfterStatement: true }),
        );
      } else {
        record(
          'reserve',
          unitId,
          reserve(storage, { wallet, apiKeyId: 1, requestId: unitId, amountUsdc: 10, leaseMs: 60_000 }).then(
            (ok) => ok || Promise.reject(new Error('refused')),
          ),
        );
      }
    }
    return Promise.all(sent);
  }

  /** Whether each unit's writes are in the database. */
  async function committed(units: Sent[]): Promise<Map<string, boolean>> {
    const ids = units.map((u) => u.id);
    const marks = new Set(
      (
        await s.db
          .selectFrom('cut_marks' as never)
          .select('id' as never)
          .where('id' as never, 'in', ids as never)
          .execute()
      ).map((r) => (r as { id: string }).id),
    );
    const reservations = new Set(
      (await s.db.selectFrom('reservations').select('request_id').where('request_id', 'in', ids).execute()).map((r) => r.request_id),
    );
    const usage = new Set((await s.db.selectFrom('request_usage').select('request_id').where('request_id', 'in', ids).execute()).map((r) => r.request_id));
    return new Map(units.map((u) => [u.id, u.kind === 'reserve' ? reservations.has(u.id) : u.kind === 'finish' ? usage.has(u.id) : marks.has(u.id)]));
  }

  test('cut at 29 points of the answers: told committed is there, told not committed is not, a unit that threw never is', async () => {
    const wallets = [await fundedWallet(s.db, 10_000_000), await fundedWallet(s.db, 10_000_000), await fundedWallet(s.db, 10_000_000)];
    const tally = { ok: 0, unknown: 0, 'not committed': 0, poison: 0, unknownCommitted: 0 } as Record<string, number>;
    let rounds = 0;
    for (const cutAt of CUTS) {
      // Reservations for this round's finishes, made on the main storage (their reserves are not under attack here).
      const pending: string[] = [];
      for (let i = 0; i < 90; i++) {
        const requestId = id();
        assert.equal(await reserve(s, { wallet: wallets[i % 3]!, apiKeyId: 1, requestId, amountUsdc: 10, leaseMs: 60_000 }), true);
        pending.push(requestId);
      }
      // The startup and authentication answers come first (a few hundred bytes), then the batches' answers.
      const lane = await cutLane(cutAt);
      try {
        const units = await mixedBacklog(lane.storage, wallets, pending);
        if (lane.state.cut) rounds++;
        const inDb = await committed(units);
        const wrong = units.filter((u) => {
          const there = inDb.get(u.id);
          if (u.kind === 'poison') return there || !['poison', 'unknown', 'not committed', CONNECT_CUT].includes(u.told);
          if (u.told === 'ok') return !there;
          if (u.told === 'not committed' || u.told === CONNECT_CUT) return there;
          return u.told !== 'unknown';
        });
        assert.deepEqual(wrong, [], `cut after ${cutAt} bytes of answers`);
        for (const u of units) tally[u.told] = (tally[u.told] ?? 0) + 1;
        // An unknown outcome that did commit: a COMMIT whose answer the cut took (the case a not-committed must never be).
        tally.unknownCommitted! += units.filter((u) => u.told === 'unknown' && inDb.get(u.id)).length;
      } finally {
        await lane.close();
      }
    }
    assert.ok(rounds >= 20, `${rounds} rounds were cut`);
    // Driven: every kind of answer was heard across the cuts.
    assert.ok(tally.ok! > 0 && tally.unknown! > 0 && tally.unknownCommitted! > 0 && tally['not committed']! > 0 && tally.poison! > 0, JSON.stringify(tally));
    // Nothing applied twice: each wallet locks exactly its pending reservations, and the books balance.
    for (const wallet of wallets) {
      const reserved = await s.db
        .selectFrom('reservations')
        .select(sql<number>`coalesce(sum(amount_usdc), 0)::bigint`.as('sum'))
        .where('wallet', '=', wallet)
        .where('status', '=', 'pending')
        .executeTakeFirstOrThrow();
      assert.equal((await getBalance(s.db, wallet)).locked_usdc, Number(reserved.sum));
    }
    await assertLedgerConsistent(s.db);
  });
});
