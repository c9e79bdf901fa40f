import type { ChildProcess } from 'node:child_process';

/**
 * A child process whose output (stdout and stderr, in the order they came) is followed as it
 * comes, for commands that keep running while the test acts on what they print: a quickstart on
 * a terminal asking questions, a quickstart --listen waiting for the browser.
 */
export interface WatchedProcess {
  /** Everything it wrote so far. */
  output(): string;
  /** Resolves with the first match once the output shows `pattern`; fails if the process ends without. */
  shows(pattern: RegExp): Promise<RegExpExecArray>;
  /** As `shows`, in what came after the last match: the next time a question is asked, for instance. */
  showsNext(pattern: RegExp): Promise<RegExpExecArray>;
  exited: Promise<number | null>;
  child: ChildProcess;
}

export function watchProcess(child: ChildProcess): WatchedProcess {
  let output = '';
  const waiting = new Set<() => void>();
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
    for (const check of waiting) check();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  let closed = false;
  // 'close', not 'exit': by then everything it wrote has been read.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => {
    closed = true;
    for (const check of waiting) check();
    resolve(code);
  }));
  let seen = 0;
  const shows = (pattern: RegExp, from: () => number) => new Promise<RegExpExecArray>((resolve, reject) => {
    const start = from();
    const check = () => {
      const match = pattern.exec(output.slice(start));
      if (match) {
        waiting.delete(check);
        seen = start + match.index + match[0].length;
        resolve(match);
      } else if (closed) {
        waiting.delete(check);
        reject(new Error(`the process never showed ${pattern}:\n${output}`));
      }
    };
    waiting.add(check);
    check();
  });
  return {
    output: () => output,
    shows: (pattern) => shows(pattern, () => 0),
    showsNext: (pattern) => shows(pattern, () => seen),
    exited,
    child,
  };
}
