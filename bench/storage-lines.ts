import type { StorageCase } from './storage-case.ts';

const n = (x: number) => x.toLocaleString('en-US');
const kb = (bytes: number) => `${(bytes / 1024).toFixed(0)} KB`;

/** The runs a median was taken from, lowest to highest (absent in results from before 2026-11-29 15:00 UTC). */
const spread = (runs: number[] | undefined) => (runs && runs.length > 1 ? ` (runs ${Math.min(...runs).toFixed(0)}–${Math.max(...runs).toFixed(0)})` : '');

/** The storage case as the report prints it, before the target lines that judge it. */
export function storageLines(c: StorageCase): string[] {
  const r = c.retained;
  const tables = Object.entries(r.tables)
    .map(([name, bytes]) => `${name} ${kb(bytes)}`)
    .join(', ');
  return [
    `Storage (${c.engine}, ${n(c.wallets)} wallets, the ledger's own reserve and finish, no HTTP): ${n(r.requests)} requests, checkpointed by ledger-check, ` +
      `retired by the retention pass after their window, then VACUUM: ${r.bytesPerRequest.toFixed(0)} bytes per request left in the hot tables ` +
      `and their indexes (${tables}); the retention took ${(r.retentionMs / 1000).toFixed(1)} s.`,
    `The operator's ledger-check with the checkpoint job on (older history bulk-inserted as well-formed rows and checkpointed, not driven; ` +
      `new requests driven through the ledger; the histories timed in turn, the median of each one's runs). The job's pass over one period (${n(c.job.requests)} requests, ${c.job.periodSeconds} s at 1,000 req/s): ` +
      `${c.job.ms.toFixed(0)} ms, ${c.job.cpuMs.toFixed(0)} ms CPU = ${c.job.cpuPerRequestUs.toFixed(1)} µs per request. The tail after its checkpoint:`,
    ...c.checks.map((k) => `  ${n(k.olderRequests).padStart(11)} older, ${n(k.newRequests).padStart(7)} new: ${k.ms.toFixed(0)} ms${spread(k.runs)}`),
    `  per million older ${(c.projection.perMillionOlderMs / 1000).toFixed(3)} s; after a day at 1,000 req/s on 10 M older, projected: ` +
      `${(c.projection.dayMs / 1000).toFixed(2)} s = ${c.projection.rule}`,
  ];
}
