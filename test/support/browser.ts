import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Locator, type Page, type Request } from 'playwright-core';

/**
 * The system's Debian Chromium driven by playwright-core (no browser downloads). Background
 * networking, updates and sync are off, so the only traffic is what the pages themselves make.
 */
export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A fresh context (no cookies, no storage) and a page in it: one per test. */
export async function newPage(browser: Browser, options: BrowserContextOptions = {}): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  return { context, page };
}

/** A suite's Chromium: pages in fresh contexts, each closed after the test that opened it. */
export interface SuiteBrowser {
  /** A page in a fresh context (no cookies, no storage), the suite's defaults under `options`. */
  open(options?: BrowserContextOptions): Promise<Page>;
}

/**
 * Registers in the calling `describe` the hooks every browser suite needs: Chromium launched
 * before its tests and closed after them, and each test's contexts closed after it. The launch is
 * started, not awaited, in its hook, so the browser comes up while the suite's own `before` starts
 * its servers; the first `open` waits for it (and fails with the launch's error).
 */
export function browserForSuite(defaults: BrowserContextOptions = {}): SuiteBrowser {
  let launching: Promise<Browser> | undefined;
  const contexts: BrowserContext[] = [];
  before(function () {
    launching = launchBrowser();
    launching.catch(() => undefined);
  });
  afterEach(async function () {
    await Promise.all(contexts.splice(0).map((context) => context.close()));
  });
  after(async function () {
    await (await launching?.catch(() => undefined))?.close();
  });
  return {
    async open(options = {}) {
      if (!launching) throw new Error('open() is for the suite\'s tests and hooks, after its before hooks started');
      const { context, page } = await newPage(await launching, { ...defaults, ...options });
      contexts.push(context);
      return page;
    },
  };
}

export interface CapturedRequest {
  url: URL;
  method: string;
  /** The request body (form_post), or null. */
  body: string | null;
  contentType: string | undefined;
}

export interface RedirectCapture {
  /** Every request the browser made to the redirect URI, in order. */
  readonly hits: CapturedRequest[];
  /** The first (or next not yet taken) request to the redirect URI; rejects after `timeoutMs`. */
  next(timeoutMs?: number): Promise<CapturedRequest>;
}

/**
 * Answers every request to URLs starting with `redirectUriPrefix` inside the browser (200 "ok"),
 * so the redirect to the client is captured without any network traffic.
 *
 * This intercepts at the DevTools protocol's Fetch layer rather than with `page.route`:
 * Playwright never routes the follow-up request of an HTTP redirect (it continues it
 * unrouted), and the server reaches the client by redirecting (e.g. `GET /oauth/authorize`
 * -> 303 -> redirect_uri), so `page.route` would miss it. Fetch pauses every redirect hop.
 */
export async function captureRedirect(page: Page, redirectUriPrefix: string): Promise<RedirectCapture> {
  const hits: CapturedRequest[] = [];
  const waiters: Array<(hit: CapturedRequest) => void> = [];
  let taken = 0;

  const session = await page.context().newCDPSession(page);
  session.on('Fetch.requestPaused', (event) => {
    const { request } = event;
    const body = request.postDataEntries
      ? Buffer.concat(request.postDataEntries.map((entry) => Buffer.from(entry.bytes ?? '', 'base64'))).toString()
      : (request.postData ?? null);
    const contentType = Object.entries(request.headers).find(([name]) => name.toLowerCase() === 'content-type')?.[1];
    const hit: CapturedRequest = { url: new URL(request.url), method: request.method, body, contentType };
    hits.push(hit);
    void session.send('Fetch.fulfillRequest', {
      requestId: event.requestId,
      responseCode: 200,
      responseHeaders: [{ name: 'Content-Type', value: 'text/plain' }],
      body: Buffer.from('ok').toString('base64'),
    }).catch(() => { /* the page or context went away */ });
    const waiter = waiters.shift();
    if (waiter) {
      taken += 1;
      waiter(hit);
    }
  });
  const pattern = redirectUriPrefix.replace(/[\\*?]/g, (char) => `\\${char}`);
  await session.send('Fetch.enable', { patterns: [{ urlPattern: `${pattern}*`, requestStage: 'Request' }] });

  return {
    hits,
    next(timeoutMs = 10_000) {
      if (taken < hits.length) {
        const hit = hits[taken]!;
        taken += 1;
        return Promise.resolve(hit);
      }
      return new Promise<CapturedRequest>((resolve, reject) => {
        const done = (hit: CapturedRequest) => {
          clearTimeout(timer);
          resolve(hit);
        };
        const timer = setTimeout(() => {
          const index = waiters.indexOf(done);
          if (index >= 0) waiters.splice(index, 1);
          reject(new Error(`no request to ${redirectUriPrefix} within ${timeoutMs} ms (page at ${page.url()})`));
        }, timeoutMs);
        waiters.push(done);
      });
    },
  };
}

/** Records every request the page makes (documents, subresources, favicons, form posts). */
export function recordRequests(page: Page): Request[] {
  const requests: Request[] = [];
  page.on('request', (request) => requests.push(request));
  return requests;
}

/** Fills in the sign-in page the browser shows and submits it (the user's own password unless another is given). */
export async function signIn(page: Page, user: { email: string; password: string }, password = user.password): Promise<void> {
  await page.getByLabel('Email').fill(user.email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/**
 * Sends a copy of the page's form as the browser would, with its cookies, from outside the
 * browser, which never sees the answer: the first of two sendings of a form whose first answer the
 * browser dropped (a double click without JavaScript). The browser's cookies stay as they were.
 */
export async function sendFormCopy(page: Page, form: Locator): Promise<Response> {
  const { action, body } = await form.evaluate((element: HTMLFormElement) => ({
    action: element.action,
    body: new URLSearchParams([...new FormData(element)].map(([name, value]) => [name, String(value)])).toString(),
  }));
  const cookies = (await page.context().cookies(action)).map(({ name, value }) => `${name}=${value}`).join('; ');
  return fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookies }, body, redirect: 'manual' });
}

/** The POSTs the page makes to `path` from now on, as they are when called. */
export function postsTo(page: Page, path: string): () => Request[] {
  const requests = recordRequests(page);
  return () => requests.filter((request) => request.method() === 'POST' && new URL(request.url()).pathname === path);
}

/**
 * Clicks the element twice, `gapMs` apart, with the mouse where it was at the first click, as a
 * person's double click on a button whose page is still waiting for its answer.
 */
export async function clickTwice(page: Page, target: Locator, gapMs = 80): Promise<void> {
  // The page's deferred script, which keeps a form from being sent twice, has run by DOMContentLoaded:
  // on a loaded machine a button can be visible, and clicked, before it has.
  await page.waitForLoadState('domcontentloaded');
  // A click at a point off the screen (a phone's, the button further down) reaches nothing.
  await target.scrollIntoViewIfNeeded();
  const box = await target.boundingBox();
  if (!box) throw new Error('nothing to click');
  const [x, y] = [box.x + box.width / 2, box.y + box.height / 2];
  await page.mouse.click(x, y);
  await new Promise((resolve) => setTimeout(resolve, gapMs));
  await page.mouse.click(x, y);
}

/** Holds each request to `url` back `ms` before it goes on, as a slow server would answer late. */
export async function answerLate(page: Page, url: string, ms: number): Promise<void> {
  await page.route(url, async (route) => {
    await new Promise((resolve) => setTimeout(resolve, ms));
    // The browser may have given up on it meanwhile (a second sending replaced it).
    await route.continue().catch(() => undefined);
  });
}

/**
 * The element that has the focus, once the page's `autofocus` has been applied: the browser does
 * that when it next renders, not when the page loads, so a read right after a navigation may find
 * the body focused still (it did, under a busy machine's load). Two animation frames later it has.
 */
export async function focusedElement(page: Page): Promise<{ id: string; value: string | null; tag: string } | undefined> {
  return page.evaluate(async () => {
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    const element = document.activeElement;
    return element ? { id: element.id, value: element.getAttribute('value'), tag: element.tagName.toLowerCase() } : undefined;
  });
}
