import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

import { SCHEMA } from './schema.ts';

/**
 * The operator guide's Configuration table, generated from config/schema.ts so the two cannot drift:
 * `npm run config:table` prints it, `npm run config:table -- --write` puts it into docs/operator-guide.md
 * between the markers below (test/unit/config.test.ts checks it is up to date).
 */

const TABLE_START = '<!-- config:table: generated from config/schema.ts by `npm run config:table -- --write`; edit there -->';
const TABLE_END = '<!-- /config:table -->';

/** The document that holds the table. */
export const CONFIGURATION_DOCUMENT = fileURLToPath(new URL('../docs/operator-guide.md', import.meta.url));

/** A Markdown table cell: a `|` would end it. */
const cell = (markdown: string) => markdown.replaceAll('|', '\\|');

export function configurationTable(): string {
  const rows = Object.entries(SCHEMA).map(([name, variable]) => {
    const shown = variable.shownDefault ?? (variable.default === undefined ? '—' : `\`${variable.default}\``);
    return `| \`${name}\` | ${cell(shown)} | ${cell(variable.meaning)} |`;
  });
  return ['| Variable | Default | Meaning |', '|---|---|---|', ...rows].join('\n');
}

/** The document with its table replaced by the generated one. */
export function withTable(document: string): string {
  const start = document.indexOf(TABLE_START);
  const end = document.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`docs/operator-guide.md has no ${TABLE_START} ... ${TABLE_END} section`);
  return `${document.slice(0, start + TABLE_START.length)}\n${configurationTable()}\n${document.slice(end)}`;
}

if (import.meta.main) {
  if (process.argv.includes('--write')) {
    await writeFile(CONFIGURATION_DOCUMENT, withTable(await readFile(CONFIGURATION_DOCUMENT, 'utf8')));
  } else {
    process.stdout.write(`${configurationTable()}\n`);
  }
}
