// Plain JavaScript, run before any of the service's TypeScript: an older Node.js cannot load a .ts
// file at all (ERR_UNKNOWN_FILE_EXTENSION), so this is the only place it can be told in words.
import { readFileSync } from 'node:fs';

/** The major version package.json's engines.node asks for (">=24"), so the two never disagree. */
function neededMajor() {
  const { engines } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  return Number(/^>=\s*(\d+)/.exec(engines.node)[1]);
}

/** True when this Node.js runs the service; otherwise says so in one line on stderr and sets exit code 1. */
export function nodeIsRecentEnough() {
  const needed = neededMajor();
  const running = process.versions.node;
  if (Number(running.split('.')[0]) >= needed) return true;
  process.stderr.write(`this service needs Node.js ${needed} or later; this is Node.js ${running} (${process.execPath}). See README.md, "Run it".\n`);
  process.exitCode = 1;
  return false;
}
