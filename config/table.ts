import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

import { SCHEMA } from './schema.ts';

/**
 * The README's Configuration table, generated from config/schema.ts so the two cannot drift:
 * `npm run config:table` prints it, `npm run config:table -- --write` puts it into README.md
 * between the markers below (test/config.test.ts checks it is up to date).
 */

const TABLE_START = '<!-- config:table: generated from config/schema.ts by `npm run config:table -- --write`; edit there -->';
const TABLE_END = '<!-- /config:table -->';

const README = fileURLToPath(new URL('../README.md', import.meta.url));

/** A Markdown table cell: a `|` would end it. */
const cell = (markdown: string) => markdown.replaceAll('|', '\\|');

export function configurationTable(): string {
  const rows = Object.entries(SCHEMA).map(([name, variable]) => {
    const shown = variable.shownDefault ?? (variable.default === undefined ? '—' : `\`${variable.default}\``);
    return `| \`${name}\` | ${cell(shown)} | ${cell(variable.meaning)} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

/** The README with its table replaced by the generated one. */
export function withTable(readme: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`README.md has no ${TABLE_START} ... ${TABLE_END} section`);
  return `${readme.slice(0, start + TABLE_START.length)}\n${configurationTable()}\n${readme.slice(end)}`;
}

if (import.meta.main) {
  if (process.argv.includes('--write')) {
    await writeFile(README, withTable(await readFile(README, 'utf8')));
  } else {
    process.stdout.write(`${configurationTable()}\n`);
  }
}
