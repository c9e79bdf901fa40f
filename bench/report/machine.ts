import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';

import { ROOT } from '../processes.ts';

/** The context a number needs to mean anything: which machine, which Node, which code, when. */
export interface MachineInfo {
  date: string;
  node: string;
  cpuModel: string;
  cores: number;
  loadAverage: number[];
  engineVersion: string;
  /** The service's code: commit, plus "-dirty" with uncommitted changes (src/ may be changing under the bench). */
  revision: string;
}

export function machineInfo(): MachineInfo {
  return {
    date: new Date().toISOString(),
    node: process.version,
    cpuModel: cpuModel(),
    cores: availableParallelism(),
    loadAverage: loadavg().map((value) => Math.round(value * 100) / 100),
    engineVersion: engineVersion(),
    revision: revision(),
  };
}

function cpuModel(): string {
  try {
    return /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function engineVersion(): string {
  try {
    return (JSON.parse(readFileSync(`${ROOT}node_modules/oidc-provider/package.json`, 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function revision(): string {
  try {
    return execFileSync('git', ['describe', '--always', '--dirty'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
}
