import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * `mkdir -p`: creates `path` and any missing parents with `mode`. Resolves the first directory it
 * created, or undefined when `path` was already a directory, as Node's recursive mkdirSync does.
 * Not that one: on a filesystem that refuses a directory with ENOENT although its parent exists
 * (procfs, sysfs), Node's recursive mkdir retries the parent for ever and the service hangs at
 * start; here the refusal is thrown.
 */
export function makeDirectories(path: string, mode: number): string | undefined {
  try {
    return makeDirectory(path, mode) ? path : undefined;
  } catch (error) {
    const parent = dirname(path);
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || parent === path) throw error;
    const first = makeDirectories(parent, mode);
    return makeDirectory(path, mode) ? first ?? path : first;
  }
}

/** False when `path` is a directory already: another process (an instance starting beside this one) may have just made it. */
function makeDirectory(path: string, mode: number): boolean {
  try {
    mkdirSync(path, { mode });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST' && statSync(path).isDirectory()) return false;
    throw error;
  }
}
