import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** A straight apostrophe between two letters ("the workspace's data"): the pages write the typographic one (’), as they write “quotes”. */
const STRAIGHT = /\p{L}'\p{L}/u;

/** The text a person reads of a view: outside EJS tags, HTML tags, style and script, and CSS comments (of a view of styles alone). */
function textOfView(source: string): string {
  return source
    .replace(/<%[\s\S]*?%>/g, ' ')
    .replace(/<(style|script)\b[\s\S]*?<\/\1>/g, ' ')
    .replace(/\/\*[\s\S]*?\*\//g, ' ')
    .replace(/<[^>]*>/g, ' ');
}

/**
 * A module's code without its comments, where a letter, an apostrophe and a letter can only be in
 * a string: escaped in a single-quoted one (`workspace\'s`), as it is in a template or a
 * double-quoted one. (A `//` after a colon or a quote is a URL's, and stays.)
 */
function codeOf(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, ' ').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1').replace(/\\'/g, "'");
}

const filesIn = (folder: string, ending: string) => readdirSync(join(root, folder)).filter((name) => name.endsWith(ending)).map((name) => join(folder, name));

/**
 * The pages' words use one apostrophe, the typographic one: the views' text, and the sentences the
 * settings area, the sign-in and consent pages and the error page put in them.
 */
describe('the pages\' apostrophes', function () {
  it('are typographic (’) in every view\'s text and every string of the settings, interaction and page modules', function () {
    const straight: string[] = [];
    for (const file of filesIn('views', '.ejs')) {
      for (const line of textOfView(readFileSync(join(root, file), 'utf8')).split('\n')) if (STRAIGHT.test(line)) straight.push(`${file}: ${line.trim()}`);
    }
    for (const file of ['src/settings', 'src/interactions', 'src/pages'].flatMap((folder) => filesIn(folder, '.ts'))) {
      for (const line of codeOf(readFileSync(join(root, file), 'utf8')).split('\n')) if (STRAIGHT.test(line)) straight.push(`${file}: ${line.trim()}`);
    }
    expect(straight).to.deep.equal([]);
  });
});
