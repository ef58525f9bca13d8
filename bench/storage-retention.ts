/*
 * The storage case of `npm run bench` (bench/storage-case.ts) on its own, at sizes of your choice:
 * node --import tsx bench/storage-retention.ts [--quick] [--retained N] [--older N,N,…] [--period-seconds N]
 * e.g. --older 100000,10000000 for the 10 million older requests (about 8 GB of SQLite file).
 */
import { parseArgs } from 'node:util';
import { FULL_SIZES, measureStorage, parseHistorySizes, QUICK_SIZES, type StorageSizes } from './storage-case.ts';
import { runScript } from './script.ts';
import { storageLines } from './storage-lines.ts';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    retained: { type: 'string' },
    older: { type: 'string' },
    'period-seconds': { type: 'string' },
  },
});
const base = values.quick ? QUICK_SIZES : FULL_SIZES;
const size = (v: string | undefined, fallback: number) => (v === undefined ? fallback : Number(v));
const sizes: StorageSizes = {
  retained: size(values.retained, base.retained),
  older: values.older === undefined ? base.older : parseHistorySizes(values.older),
  periodSeconds: size(values['period-seconds'], base.periodSeconds),
};
await runScript('storage', async ({ dir }) => {
  const started = Date.now();
  const result = await measureStorage(dir, sizes, (text) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${text}\n`));
  process.stdout.write(`${storageLines(result).join('\n')}\n`);
});
