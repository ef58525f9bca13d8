import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
// @ts-expect-error: a plain .mjs script with no declaration file; its report is checked field by field below.
import { cycles, FORBIDDEN_IN_HTTP, importGraphReport } from '../../scripts/import-graph.mjs';

/**
 * The layering rules of src/ (scripts/import-graph.mjs): no import cycle between files or folders,
 * and nothing below the HTTP layer imports Fastify or services.ts. The lists of exceptions are empty;
 * an exception would be
 * listed here by name, so the check fails on any new one and on a listed one that is gone.
 */
const KNOWN = {
  fileCycles: [] as string[],
  folderCycles: [] as string[],
  forbidden: [] as string[],
  httpForbidden: [] as string[],
};

interface Report {
  files: number;
  fileCycles: string[][];
  folderCycles: Array<{ members: string[] }>;
  forbidden: Array<{ file: string; imports: string }>;
  httpForbidden: Array<{ file: string; imports: string }>;
}

describe('the import graph of src/', () => {
  const report = importGraphReport() as Report;

  test('no file cycle beyond the listed exceptions', () => {
    assert.deepEqual(report.fileCycles.map((c) => c.join(' ⇄ ')).sort(), [...KNOWN.fileCycles].sort());
  });

  test('no folder cycle beyond the listed exceptions', () => {
    assert.deepEqual(report.folderCycles.map((c) => c.members.join(' ⇄ ')).sort(), [...KNOWN.folderCycles].sort());
  });

  test('nothing below the HTTP layer imports Fastify or services.ts, beyond the listed exceptions', () => {
    assert.deepEqual(report.forbidden.map((f) => `${f.file} imports ${f.imports}`).sort(), [...KNOWN.forbidden].sort());
  });

  test('src/http/ imports no ledger module and no payment store (it maps outcomes; money moves below it)', () => {
    assert.deepEqual(report.httpForbidden.map((f) => `${f.file} imports ${f.imports}`).sort(), [...KNOWN.httpForbidden].sort());
  });

  test('the http rules name the ledger and every payment store, and not what http may read (so the check above cannot pass by matching nothing)', () => {
    const ruled = (target: string) => (FORBIDDEN_IN_HTTP as Array<{ test: (t: string) => boolean }>).some((rule) => rule.test(target));
    const stores = ['payments/payment-store.ts', 'payments/upto/upto-store.ts', 'payments/pay-per-request/identifier-store.ts'];
    for (const target of ['ledger/balances.ts', 'ledger/operations/reserve.ts', ...stores]) assert.ok(ruled(target), target);
    for (const target of ['payments/payment-row.ts', 'payments/paid-request/outcome.ts', 'sessions/store.ts', 'chat/run.ts']) assert.ok(!ruled(target), target);
  });

  test('the cycle finder finds cycles and only cycles (so the lists above cannot pass by reading nothing)', () => {
    const graph = (edges: Record<string, string[]>) => new Map(Object.entries(edges).map(([k, v]) => [k, new Set(v)]));
    assert.deepEqual(cycles(['a', 'b', 'c'], graph({ a: ['b'], b: ['c'], c: ['a'] })), [['a', 'b', 'c']]);
    assert.deepEqual(cycles(['a', 'b', 'c'], graph({ a: ['b'], b: ['c'] })), []);
    assert.deepEqual(cycles(['a'], graph({ a: ['a'] })), [['a']]);
    assert.ok(report.files > 100, 'the script read the tree');
  });
});
