import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU seconds per process, read from Linux's /proc, so a benchmark can say where a run's time
 * went when every process shares the same cores. Undefined wherever /proc cannot tell (another
 * OS, a process already gone, a database on another machine).
 */

/** Clock ticks per second of /proc's times: 100 on every Linux build Node supports. */
const TICKS_PER_SECOND = 100;

interface Times {
  /** utime + stime of the process itself. */
  readonly own: number;
  /** cutime + cstime: its children that have exited and been reaped. */
  readonly reaped: number;
  readonly command: string;
}

function timesOf(pid: number | 'self'): Times | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command is in parentheses and may itself hold spaces or parentheses.
    const close = stat.lastIndexOf(')');
    const command = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    // Fields 14-17 of proc(5), counted from the state (field 3) here.
    const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number) as [
      number,
      number,
      number,
      number,
    ];
    return { own: (utime + stime) / TICKS_PER_SECOND, reaped: (cutime + cstime) / TICKS_PER_SECOND, command };
  } catch {
    return undefined;
  }
}

/** CPU seconds a live process has used so far. */
export function processCpuSeconds(pid: number | undefined): number | undefined {
  return pid === undefined ? undefined : timesOf(pid)?.own;
}

/** CPU seconds of this process's children that have exited: a CLI run's cost, read around it. */
export function reapedChildrenCpuSeconds(): number | undefined {
  return timesOf('self')?.reaped;
}

/**
 * CPU seconds of every PostgreSQL process on this machine, including backends that have exited
 * (reaped by the postmaster). Undefined when no PostgreSQL runs here.
 */
export function postgresCpuSeconds(): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined; // no /proc: not Linux
  }
  let total = 0;
  let found = false;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const times = timesOf(Number(entry));
    if (times === undefined || !times.command.startsWith('postgres')) continue;
    found = true;
    total += times.own + times.reaped;
  }
  return found ? total : undefined;
}

/** A reading of several CPU counters; cpuSpent turns two readings into what each spent between them. */
export type CpuReading = Record<string, number | undefined>;

export function cpuSpent(before: CpuReading, after: CpuReading): Record<string, number> {
  const spent: Record<string, number> = {};
  for (const [name, value] of Object.entries(after)) {
    const start = before[name];
    if (value !== undefined && start !== undefined) spent[name] = value - start;
  }
  return spent;
}

/** A process's CPU seconds so far, read at `atMs` (epoch milliseconds). */
export interface CpuSample {
  readonly atMs: number;
  readonly seconds: number;
}

/**
 * The CPU a process had spent by `atMs`, from samples in time order: the last one read at or
 * before it (so within one sampling interval, and /proc's 10 ms tick, of the truth). Undefined
 * before the first.
 */
export function cpuAt(samples: readonly CpuSample[], atMs: number): number | undefined {
  let found: number | undefined;
  for (const sample of samples) {
    if (sample.atMs > atMs) break;
    found = sample.seconds;
  }
  return found;
}
