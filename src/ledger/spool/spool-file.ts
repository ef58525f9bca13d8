import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, statSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { SettleRecord } from '../reservations.ts';

/**
 * The durable local record of settles the database did not take: one JSON line per settle,
 * appended and fsync'd before the caller goes on (a non-streaming answer is only handed out once
 * its bill is on disk). Applying a line is idempotent by request id, so a line applied twice (a
 * crash between applying and forgetting it) charges once.
 *
 * Several instances may share a directory (several `tollgate serve` on one host): each takes a
 * slot, `settle-<db>-<n>.jsonl`, guarded by a `.lock` file naming its pid, and only ever writes or
 * deletes its own slots. A slot whose owner is gone (a crash leaves its lock behind) is adopted at
 * start-up, so its lines are applied by whichever instance starts next. `<db>` is a fingerprint of
 * the database URL, so a spool is never applied to another database.
 */
export class SettleSpool {
  private readonly file: string;
  private created = false;

  private constructor(
    private readonly dir: string,
    /** This instance's own slot first, then adopted ones. */
    private readonly slots: string[],
  ) {
    this.file = `${slots[0]!}.jsonl`;
  }

  static open(dir: string, databaseFingerprint: string): SettleSpool {
    mkdirSync(dir, { recursive: true });
    return new SettleSpool(dir, takeSlots(dir, `settle-${databaseFingerprint}-`));
  }

  /** Appends one settle and forces it to disk; throws if it cannot (the caller must not pretend it is billed). */
  append(record: SettleRecord): void {
    const fd = openSync(this.file, 'a', 0o600);
    try {
      writeSync(fd, `${JSON.stringify({ ...record, spooledAt: Date.now() })}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (!this.created) {
      // The new file's directory entry must be durable too.
      syncDirectory(this.dir);
      this.created = true;
    }
  }

  /**
   * Every spooled settle still on disk in this instance's slots, with a `forget` that deletes a
   * slot's file once all its lines were applied and nothing was appended since they were read.
   */
  read(): { records: SettleRecord[]; forget(applied: Set<string>): void } {
    const seen: { file: string; size: number; ids: string[] }[] = [];
    const records = new Map<string, SettleRecord>();
    for (const slot of this.slots) {
      const file = `${slot}.jsonl`;
      if (!existsSync(file)) continue;
      const text = readFileSync(file, 'utf8');
      const ids: string[] = [];
      for (const line of text.split('\n')) {
        const record = parseRecord(line);
        if (!record) continue; // a line torn by a crash mid-write: its request was never answered
        ids.push(record.requestId);
        records.set(record.requestId, record);
      }
      seen.push({ file, size: Buffer.byteLength(text), ids });
    }
    return {
      records: [...records.values()],
      forget: (applied) => {
        for (const s of seen) {
          if (!s.ids.every((id) => applied.has(id))) continue;
          // Synchronous from the size check to the unlink: no append of this process can slip in.
          if (statSync(s.file, { throwIfNoEntry: false })?.size !== s.size) continue;
          unlinkSync(s.file);
          if (s.file === this.file) this.created = false;
        }
      },
    };
  }

  /** Gives the slots back (their files stay if they still hold lines). */
  close(): void {
    for (const slot of this.slots) {
      held.delete(`${slot}.lock`);
      try {
        unlinkSync(`${slot}.lock`);
      } catch {
        // already gone
      }
    }
  }
}

/** Lock files held by this process (several gateways may run in one process, as in tests). */
const held = new Set<string>();

function takeSlots(dir: string, prefix: string): string[] {
  const existing = readdirSync(dir)
    .filter((f) => f.startsWith(prefix))
    .map((f) => Number(f.slice(prefix.length).split('.')[0]))
    .filter((n) => Number.isInteger(n));
  const last = existing.length ? Math.max(...existing) : -1;
  const slots: string[] = [];
  for (let n = 0; n <= last + 1 || slots.length === 0; n++) {
    const slot = join(dir, `${prefix}${n}`);
    if (!tryLock(`${slot}.lock`)) continue;
    // The first free slot is this instance's own; later ones are kept only if they hold lines.
    if (slots.length === 0 || existsSync(`${slot}.jsonl`)) slots.push(slot);
    else release(`${slot}.lock`);
  }
  return slots;
}

function tryLock(lock: string): boolean {
  if (held.has(lock)) return false;
  try {
    writeFileSync(lock, String(process.pid), { flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const owner = Number(readFileSync(lock, 'utf8'));
    // Our own pid in a lock we do not hold is a previous life of this process (a container's pid 1).
    if (owner !== process.pid && isAlive(owner)) return false;
    writeFileSync(lock, String(process.pid));
  }
  held.add(lock);
  return true;
}

function release(lock: string): void {
  held.delete(lock);
  unlinkSync(lock);
}

function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function syncDirectory(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function parseRecord(line: string): SettleRecord | null {
  if (!line.trim()) return null;
  try {
    const r = JSON.parse(line);
    if (typeof r?.requestId !== 'string' || typeof r.wallet !== 'string' || !Number.isSafeInteger(r.chargeUsdc) || typeof r.usage !== 'object') return null;
    return { requestId: r.requestId, wallet: r.wallet, chargeUsdc: r.chargeUsdc, usage: r.usage };
  } catch {
    return null;
  }
}
