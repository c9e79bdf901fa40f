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
    mkdirSync(path, { mode });
    return path;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && statSync(path).isDirectory()) return undefined;
    const parent = dirname(path);
    if (code !== 'ENOENT' || parent === path) throw error;
    const first = makeDirectories(parent, mode);
    mkdirSync(path, { mode });
    return first ?? path;
  }
}
