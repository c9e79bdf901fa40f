import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type * as Axe from 'axe-core';
import { expect } from 'chai';
import type { Page } from 'playwright-core';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Screenshots of every page checked, for people to look at (ignored by git). */
export const SCREENSHOTS = join(ROOT, 'test-output', 'screenshots');
/** Everything axe found on each page, serious or not. */
export const AXE_REPORTS = join(ROOT, 'test-output', 'axe');
export const PHONE = { width: 390, height: 844 };
export const DESKTOP = { width: 1280, height: 800 };

export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/**
 * axe-core is evaluated through DevTools (`page.evaluate` of its source) rather than added as a
 * <script> element: the pages' policy allows no script, and a DevTools evaluation is not subject
 * to it. The alternative, a context opened with `bypassCSP: true`, would switch off the very
 * policy under test: the audit would then see images the real page could not load (a logo the
 * policy blocks), so the page audited would not be the page users get.
 */
const AXE_SOURCE = await readFile(join(ROOT, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

export async function axeViolations(page: Page): Promise<Violation[]> {
  if (!await page.evaluate(() => 'axe' in window)) await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const axe = (window as unknown as { axe: typeof Axe }).axe;
    const results = await axe.run(document, { resultTypes: ['violations'] });
    return results.violations.map((violation) => ({
      id: violation.id,
      impact: violation.impact ?? null,
      help: violation.help,
      nodes: violation.nodes.map((node) => `${node.target.join(' ')}: ${node.failureSummary ?? ''}`),
    }));
  });
}

/** Waits until every image on the page has loaded or failed. */
export const imagesSettled = (page: Page) => page.waitForFunction(() => Array.from(document.images).every((image) => image.complete));

/**
 * The page at phone width (no horizontal scrolling, a screenshot), its axe audit (nothing
 * serious or critical; everything found is written to test-output/axe/<name>.json), and a
 * screenshot at desktop width. Leaves the page at phone width.
 */
export async function checkPage(page: Page, name: string): Promise<void> {
  await Promise.all([mkdir(SCREENSHOTS, { recursive: true }), mkdir(AXE_REPORTS, { recursive: true })]);
  await page.setViewportSize(PHONE);
  await imagesSettled(page);
  const width = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
  expect(width.scroll, `${name}: no horizontal overflow at ${PHONE.width} px`).to.be.at.most(width.client);
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-${PHONE.width}.png`), fullPage: true });

  const violations = await axeViolations(page);
  await writeFile(join(AXE_REPORTS, `${name}.json`), `${JSON.stringify(violations, null, 2)}\n`);
  const serious = violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
  expect(serious, `${name}: serious or critical axe violations`).to.deep.equal([]);

  await page.setViewportSize(DESKTOP);
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-${DESKTOP.width}.png`), fullPage: true });
  await page.setViewportSize(PHONE);
}
