import { readdirSync, readFileSync } from 'node:fs';

/** CPU time and memory of a process, from /proc (Linux). */
const TICKS_PER_SECOND = 100; // USER_HZ, fixed at 100 on Linux

/** User + system CPU time of `pid` and its threads (with `reapedChildren`, and of its children it has waited for), in microseconds. */
export function cpuMicros(pid: number, o: { reapedChildren?: boolean } = {}): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which may contain spaces, start after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  const children = o.reapedChildren ? Number(fields[13]) + Number(fields[14]) : 0;
  return ((utime + stime + children) * 1_000_000) / TICKS_PER_SECOND;
}

/** CPU time of several processes (the instances of one target), summed, in microseconds. */
export function cpuMicrosOf(pids: number[]): number {
  return pids.reduce((sum, pid) => sum + cpuMicros(pid), 0);
}

/**
 * Read and write system calls made so far by `pid` (all its threads: `syscr`, `syscw` of
 * /proc/PID/io), or NaN when that file cannot be read (another user's process). Counts, unlike CPU
 * time, do not swell when the machine is loaded, so they compare two trees on a busy machine.
 */
export function systemCalls(pid: number): { reads: number; writes: number } {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    return { reads: Number(io.match(/^syscr: (\d+)$/m)?.[1]), writes: Number(io.match(/^syscw: (\d+)$/m)?.[1]) };
  } catch {
    return { reads: NaN, writes: NaN };
  }
}

/** Resident set size of `pid`, in bytes. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(status.match(/^VmRSS:\s+(\d+) kB/m)?.[1]);
  return kb * 1024;
}

/**
 * CPU time the whole machine spent busy (every core, every process: user, nice, system, irq,
 * softirq, steal), in microseconds, from /proc/stat. Over a phase, divided by its wall time, it
 * says how many of the cores were taken, by the benchmark's processes or by anything else.
 */
export function machineBusyMicros(): number {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = fields as [number, number, number, number, number, number, number, number];
  return ((user + nice + system + irq + softirq + steal) * 1_000_000) / TICKS_PER_SECOND;
}

/** The processes of a PostgreSQL server: its postmaster (found by its port) first, then the backends it forked still running; none without a server. */
export function postgresPids(port: number): number[] {
  const stats = readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        return [{ pid: Number(pid), ppid: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]), cmdline }];
      } catch {
        return []; // exited while we looked
      }
    });
  const postmaster = stats.find((s) => s.cmdline.startsWith('/usr/lib/postgresql/') && s.cmdline.includes(`\0-p\0${port}\0`));
  if (!postmaster) return [];
  return [postmaster.pid, ...stats.filter((s) => s.ppid === postmaster.pid).map((s) => s.pid)];
}

/**
 * CPU of a PostgreSQL server: the postmaster, every backend it forked still running, and those
 * that exited (their time is the postmaster's reaped children's: cutime, cstime), so a pool
 * closing a connection between two readings does not take its backend's time away.
 */
export function postgresCpuMicros(port: number): number {
  const [postmaster, ...backends] = postgresPids(port);
  if (postmaster === undefined) return NaN;
  return cpuMicros(postmaster, { reapedChildren: true }) + backends.reduce((sum, pid) => sum + cpuOrZero(pid), 0);
}

/** A backend's CPU, or 0 if it exited since it was listed (its time is then the postmaster's reaped children's). */
function cpuOrZero(pid: number): number {
  try {
    return cpuMicros(pid);
  } catch {
    return 0;
  }
}
