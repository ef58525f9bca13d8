import { randomUUID } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';

const gzipAsync = promisify(gzip);

/**
 * Writes request_usage rows leaving the hot table to `<dir>/request-usage-<first id>-<last id>.jsonl.gz`
 * (one JSON object per line, gzip), durably, before they are deleted: written to a temporary name,
 * fsynced, renamed, and the folder fsynced, so after a crash the file is either whole or absent.
 * A batch exported again after a crash between the export and the delete gets the same name (and
 * any different name holds the same rows under their ids): a reader dedupes by `id`.
 * Compression runs on libuv's thread pool, not the event loop.
 */
export async function exportUsageRows(dir: string, rows: readonly { id: number }[]): Promise<string> {
  await mkdir(dir, { recursive: true });
  const first = rows[0]!.id;
  const last = rows[rows.length - 1]!.id;
  const name = `request-usage-${String(first).padStart(12, '0')}-${String(last).padStart(12, '0')}.jsonl.gz`;
  const body = await gzipAsync(Buffer.from(rows.map((r) => JSON.stringify(r)).join('\n') + '\n'));
  const temporary = join(dir, `.${name}.${randomUUID()}.tmp`);
  const final = join(dir, name);
  const file = await open(temporary, 'wx', 0o600);
  try {
    try {
      await file.writeFile(body);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, final);
  } catch (err) {
    // A disk that filled up would otherwise keep each failed pass's partial file, and fill up further.
    await rm(temporary, { force: true });
    throw err;
  }
  const folder = await open(dir, 'r');
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
  return final;
}
