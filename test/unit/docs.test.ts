import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The documents whose links and paths must hold: the README, SECURITY.md and everything under docs/. */
function documents(): string[] {
  const docs = (dir: string): string[] => readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = join(dir, name);
    return statSync(join(ROOT, path)).isDirectory() ? docs(path) : name.endsWith('.md') ? [path] : [];
  });
  return ['README.md', 'SECURITY.md', ...docs('docs')];
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = !fenced && /^#{1,6}\s+(.*)$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Markdown links to files of the repository (not to the web), with their optional anchor. */
function links(markdown: string): Array<{ target: string; anchor: string | undefined }> {
  const found: Array<{ target: string; anchor: string | undefined }> = [];
  for (const [, href] of markdown.replace(/```[\s\S]*?```/g, '').matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(href!)) continue;
    const [target, anchor] = href!.split('#') as [string, string | undefined];
    found.push({ target, anchor });
  }
  return found;
}

/** Repository paths named in code spans: `src/http/app.ts`, `docs/`, `adapters/redis/keys.ts`. */
const TOP_FOLDERS = ['src', 'adapters', 'config', 'test', 'bench', 'conformance', 'docs', 'views', 'public', '.ci'];
function namedPaths(markdown: string): string[] {
  const paths: string[] = [];
  for (const [, span] of markdown.matchAll(/`([^`\s]+)`/g)) {
    const path = span!.replace(/[.,:;)]+$/, '');
    if (!TOP_FOLDERS.some((folder) => path === folder || path.startsWith(`${folder}/`))) continue;
    if (/[<>*{}$]|\.\.\./.test(path)) continue;
    paths.push(path);
  }
  return paths;
}

/** Bare file names in code spans (`registration_hygiene.ts`): each must be the name of some file of the project. */
function namedFiles(markdown: string): string[] {
  return [...markdown.matchAll(/`([A-Za-z0-9_.-]+\.(?:ts|md|ejs|js|py|env|cjs))`/g)].map((match) => match[1]!);
}

/** The name of every file of the project (node_modules and the like left out). */
function projectFileNames(dir = ''): Set<string> {
  const names = new Set<string>();
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (['node_modules', '.git', '.tools', 'data', 'test-output'].includes(entry.name)) continue;
      for (const name of projectFileNames(join(dir, entry.name))) names.add(name);
    } else names.add(entry.name);
  }
  return names;
}

describe('the documentation (README.md, SECURITY.md, docs/)', () => {
  const files = documents();

  it('links only to files and anchors that exist', () => {
    const broken: string[] = [];
    for (const file of files) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const { target, anchor } of links(text)) {
        const path = target === '' ? file : join(dirname(file), target);
        if (!existsSync(join(ROOT, path))) {
          broken.push(`${file}: ${target} does not exist`);
          continue;
        }
        if (anchor !== undefined && path.endsWith('.md') && !anchorsOf(readFileSync(join(ROOT, path), 'utf8')).has(anchor)) {
          broken.push(`${file}: ${relative('.', path)} has no heading #${anchor}`);
        }
      }
    }
    expect(broken).to.deep.equal([]);
  });

  it('names only files and folders that exist', () => {
    const names = projectFileNames();
    const missing = files.flatMap((file) => {
      const text = readFileSync(join(ROOT, file), 'utf8');
      return [
        ...namedPaths(text).filter((path) => !existsSync(join(ROOT, path))),
        ...namedFiles(text).filter((name) => !names.has(name)),
      ].map((path) => `${file}: ${path}`);
    });
    expect(missing).to.deep.equal([]);
  });

  it('finds a broken link, a missing anchor and a missing path when there is one', () => {
    const text = '# Title\n\n## A section\n\nSee [x](nowhere.md), [y](#no-such-heading), [z](#a-section) and `src/no/such/file.ts`.\n';
    expect(links(text).map(({ target, anchor }) => `${target}#${anchor ?? ''}`)).to.deep.equal(['nowhere.md#', '#no-such-heading', '#a-section']);
    expect([...anchorsOf(text)]).to.deep.equal(['title', 'a-section']);
    expect(namedPaths(text).filter((path) => !existsSync(join(ROOT, path)))).to.deep.equal(['src/no/such/file.ts']);
    expect(namedFiles('`no_such_module.ts` and `token.ts`').filter((name) => !projectFileNames().has(name))).to.deep.equal(['no_such_module.ts']);
  });
});
