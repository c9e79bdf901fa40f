import { execFileSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';

import { ROOT, tempDir } from '../processes.ts';

export interface OtherCommit {
  /** How the report names it: its short id, and the name it was asked by when that is not the id. */
  label: string;
  /** A copy of its files (`git archive`), removed with the run's other temporary directories. */
  root: string;
}

/**
 * A copy of another commit of this repository, to run the service as it was there beside the
 * service as it is (`--against REV`). The copy uses this checkout's node_modules, and the bench
 * seeds its store with this checkout's code: a commit whose dependencies or store differ from this
 * one's cannot be compared this way.
 */
export async function checkOutCommit(revision: string): Promise<OtherCommit> {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  let commit: string;
  try {
    commit = git('rev-parse', '--verify', '--end-of-options', `${revision}^{commit}`);
  } catch {
    throw new Error(`--against: "${revision}" is no commit of this repository`);
  }
  const root = await tempDir('oauth-bench-against-');
  execFileSync('sh', ['-c', 'git archive --format=tar "$1" | tar -x -C "$2"', 'archive', commit, root], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'), 'dir');
  const short = commit.slice(0, 7);
  return { label: revision === short || commit.startsWith(revision) ? short : `${short} (${revision})`, root };
}
