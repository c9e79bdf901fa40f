import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';

import { expect } from 'chai';

import { makeDirectories } from '../../src/shared/directories.ts';

/** `mkdir -p` as the store and the key-encryption key file use it at start. */
describe('makeDirectories', () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'directories-'));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('makes the missing directories owner-only and says which was the first it made; none for one that exists', async () => {
    expect(makeDirectories(join(dir, 'a', 'b', 'c'), 0o700)).to.equal(join(dir, 'a'));
    expect((await stat(join(dir, 'a', 'b', 'c'))).mode & 0o777).to.equal(0o700);
    expect(makeDirectories(join(dir, 'a', 'b', 'c'), 0o700)).to.equal(undefined);
    expect(makeDirectories(join(dir, 'a', 'd'), 0o700)).to.equal(join(dir, 'a', 'd'));
  });

  it('refuses a path through a file, and one the filesystem refuses although its parent exists (procfs), rather than hanging', async () => {
    await writeFile(join(dir, 'file'), '');
    expect(() => makeDirectories(join(dir, 'file', 'x'), 0o700)).to.throw(/ENOTDIR/);
    expect(() => makeDirectories('/proc/no-such-directory/x', 0o700)).to.throw(/ENOENT/);
  });

  it('makes the same directories from several threads at once, each call succeeding (instances starting together)', async () => {
    const module = new URL('../../src/shared/directories.ts', import.meta.url).href;
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      import(workerData.module).then(({ makeDirectories }) => {
        let failures = 0;
        for (let i = 0; i < 300; i += 1) {
          try { makeDirectories(workerData.dir + '/' + i + '/a/b/c', 0o700); } catch { failures += 1; }
        }
        parentPort.postMessage(failures);
      });`;
    const failures = await Promise.all(Array.from({ length: 4 }, () => new Promise<number>((resolve, reject) => {
      const worker = new Worker(code, { eval: true, workerData: { module, dir } });
      worker.once('message', resolve);
      worker.once('error', reject);
    })));
    expect(failures).to.deep.equal([0, 0, 0, 0]);
  });
});
