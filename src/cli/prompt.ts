import { createInterface } from 'node:readline/promises';

/**
 * Questions asked on the terminal: the prompt goes to stderr (stdout carries only the command's
 * result, so it can be redirected) and the answer comes from stdin, which must be a TTY.
 */

/** Asks for a line; an empty answer takes `fallback` when there is one. */
export async function ask(question: string, fallback?: string): Promise<string> {
  const lines = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  try {
    const answer = (await lines.question(fallback === undefined ? `${question}: ` : `${question} [${fallback}]: `)).trim();
    return answer === '' && fallback !== undefined ? fallback : answer;
  } finally {
    lines.close();
  }
}

const ENTER = new Set(['\r', '\n']);
const ERASE = new Set(['\u007f', '\b']);
const INTERRUPT = '\u0003';
const END_OF_INPUT = '\u0004';

/**
 * Asks for a secret without echoing it: the terminal is put in raw mode and nothing typed is
 * written back. Backspace erases, Enter ends, Ctrl-C interrupts (as it would otherwise), Ctrl-D on
 * an empty answer ends it empty.
 */
export async function askHidden(question: string): Promise<string> {
  const input = process.stdin;
  // Raw before the prompt shows: whatever is typed once it shows is never echoed.
  input.setRawMode(true);
  process.stderr.write(`${question}: `);
  input.setEncoding('utf8');
  input.resume();
  let interrupted = false;
  try {
    return await new Promise<string>((resolve, reject) => {
      let value = '';
      const onData = (chunk: string) => {
        for (const character of chunk) {
          if (ENTER.has(character) || (character === END_OF_INPUT && value === '')) {
            input.off('data', onData);
            resolve(value);
            return;
          }
          if (character === INTERRUPT) {
            interrupted = true;
            input.off('data', onData);
            reject(new Error('interrupted'));
            return;
          }
          if (ERASE.has(character)) value = value.slice(0, -1);
          else if (character >= ' ') value += character;
        }
      };
      input.on('data', onData);
    });
  } finally {
    input.setRawMode(false);
    input.pause();
    process.stderr.write('\n');
    // Raw mode swallowed the terminal's own Ctrl-C: deliver it, with the terminal restored first.
    if (interrupted) process.kill(process.pid, 'SIGINT');
  }
}
