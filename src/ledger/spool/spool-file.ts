import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import type { SettleRecord } from '../reservations.ts';

/**
 * The durable local record of settles the database did not take: one JSON line per settle,
 * appended and fsync'd before the caller goes on (a non-streaming answer is only handed out once
 * its bill is on disk). Applying a line is idempotent by request id, so a line applied twice (a
 * crash between applying and forgetting it) charges once: finishReservation only closes a
 * reservation still pending, and a late charge first claims the request's usage row
 * (request_usage.request_id is unique), so a second apply finds it billed and writes nothing.
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
   * Whether the next append can succeed, for /health: this slot's file (or, before it exists, the
   * directory) is writable. It cannot see a full disk, only one that refuses writes (read-only,
   * permissions, a directory in the file's place); a failed append says the rest.
   */
  writable(): boolean {
    try {
      const stat = statSync(this.file, { throwIfNoEntry: false });
      if (stat && !stat.isFile()) return false;
      accessSync(stat ? this.file : this.dir, constants.W_OK);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Every spooled settle still on disk in this instance's slots, with a `forget` that drops the
   * applied lines of each slot unchanged since it was read: the file is deleted if none is left,
   * else rewritten with the rest (see rewriteWithout), so a line that cannot be applied does not
   * keep its billed neighbours on disk, re-applied every round for ever.
   */
  read(): { records: SettleRecord[]; forget(applied: Set<string>): void } {
    const seen: { file: string; size: number; lines: { id: string; text: string }[] }[] = [];
    const records = new Map<string, SettleRecord>();
    for (const slot of this.slots) {
      const file = `${slot}.jsonl`;
      if (!existsSync(file)) continue;
      const text = readFileSync(file, 'utf8');
      const lines: { id: string; text: string }[] = [];
      for (const line of text.split('\n')) {
        const record = parseRecord(line);
        if (!record) continue; // a line torn by a crash mid-write: its request was never answered
        lines.push({ id: record.requestId, text: line });
        records.set(record.requestId, record);
      }
      seen.push({ file, size: Buffer.byteLength(text), lines });
    }
    return {
      records: [...records.values()],
      forget: (applied) => {
        for (const s of seen) {
          const left = s.lines.filter((l) => !applied.has(l.id));
          if (left.length === s.lines.length) continue;
          // Synchronous from the size check to the unlink or rename: no append of this process can
          // slip in (and no other process writes our slots). A slot that grew since it was read is
          // left for the next round, which reads the new lines too.
          if (statSync(s.file, { throwIfNoEntry: false })?.size !== s.size) continue;
          if (left.length) {
            rewriteWithout(
              s.file,
              left.map((l) => l.text),
            );
            continue;
          }
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

/**
 * Replaces a slot's file by `lines`, crash-safe: written to a temporary file, fsync'd, renamed over
 * the slot (atomic), the directory fsync'd. A kill -9 before the rename leaves the old file whole
 * (its applied lines are applied again, which charges nothing: see SettleSpool); after it, the new
 * one. No line is ever lost, and none is billed twice. A leftover temporary file is overwritten by
 * the next rewrite and never read.
 */
function rewriteWithout(file: string, lines: string[]): void {
  const temporary = `${file}.rewrite`;
  const fd = openSync(temporary, 'w', 0o600);
  try {
    writeSync(fd, lines.map((l) => `${l}\n`).join(''));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, file);
  syncDirectory(dirname(file));
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
