import { readFile } from 'node:fs/promises';

/**
 * What a server process costs, read from Linux's /proc: memory (VmRSS) and CPU time, so the report
 * can say how big each server is and which process was the bottleneck during a run.
 * Each figure covers the process and its children: a service with `WORKERS` above 1 is a
 * supervisor whose workers serve the requests.
 */

/** Resident set size in bytes (VmRSS), or undefined when the process is gone or /proc is missing. */
export async function residentBytes(pid: number): Promise<number | undefined> {
  return sumOver(pid, async (each) => {
    const status = await readFile(`/proc/${each}/status`, 'utf8');
    const kib = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kib === undefined ? undefined : Number(kib) * 1024;
  });
}

/**
 * User + system CPU seconds the process has used so far, all its threads. /proc/PID/stat counts
 * in clock ticks; Linux fixes USER_HZ at 100 for user space, and Node cannot ask sysconf.
 */
export function cpuSeconds(pid: number): Promise<number | undefined> {
  return sumOver(pid, (each) => ticksIn(`/proc/${each}/stat`));
}

/**
 * The same for the process's main thread alone (its thread id is its pid): the JavaScript event
 * loop. Near one core means the server is bound by its single JavaScript thread, whatever the
 * process total (GC and the libuv pool, where WebCrypto signs, run on other threads); with
 * workers, near their number.
 */
export function mainThreadCpuSeconds(pid: number): Promise<number | undefined> {
  return sumOver(pid, (each) => ticksIn(`/proc/${each}/task/${each}/stat`));
}

/** `measure` summed over the process and its children; undefined when the process is gone. */
async function sumOver(pid: number, measure: (pid: number) => Promise<number | undefined>): Promise<number | undefined> {
  let total: number | undefined;
  try {
    total = await measure(pid);
  } catch {
    return undefined;
  }
  if (total === undefined) return undefined;
  for (const child of await childrenOf(pid)) {
    // A worker that ended meanwhile is left out.
    total += await measure(child).catch(() => undefined) ?? 0;
  }
  return total;
}

async function childrenOf(pid: number): Promise<number[]> {
  try {
    return (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

async function ticksIn(path: string): Promise<number | undefined> {
  try {
    const stat = await readFile(path, 'utf8');
    // The command name (field 2) may contain spaces and parentheses; the fields after its last ')' are fixed.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 (utime) and 15 (stime) of the whole line are 12 and 13 after the name.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** CPU seconds this (harness) process has used: autocannon's share of the machine. */
export function ownCpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}
