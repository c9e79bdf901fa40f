import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page, type Request } from 'playwright-core';

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
      // REDIRECT_URI's port 9 (discard) is on Chromium's blocked-port list; without this a
      // navigation to it fails with ERR_UNSAFE_PORT even though page.route answers it.
      '--explicitly-allowed-ports=9',
    ],
  });
}

/** A fresh context (no cookies, no storage) and a page in it: one per test. */
export async function newPage(browser: Browser, options: BrowserContextOptions = {}): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  return { context, page };
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
 * Answers every request to URLs starting with `redirectUriPrefix` in the browser itself (200 "ok"),
 * so the client's redirect URI is captured without any network traffic.
 */
export async function captureRedirect(page: Page, redirectUriPrefix: string): Promise<RedirectCapture> {
  const hits: CapturedRequest[] = [];
  const waiters: Array<(hit: CapturedRequest) => void> = [];
  let taken = 0;

  await page.route((url) => url.href.startsWith(redirectUriPrefix), async (route) => {
    const request = route.request();
    const hit: CapturedRequest = {
      url: new URL(request.url()),
      method: request.method(),
      body: request.postData(),
      contentType: await request.headerValue('content-type') ?? undefined,
    };
    hits.push(hit);
    await route.fulfill({ status: 200, contentType: 'text/plain', body: 'ok' });
    const waiter = waiters.shift();
    if (waiter) {
      taken += 1;
      waiter(hit);
    }
  });

  return {
    hits,
    next(timeoutMs = 10_000) {
      if (taken < hits.length) {
        const hit = hits[taken]!;
        taken += 1;
        return Promise.resolve(hit);
      }
      return new Promise<CapturedRequest>((resolve, reject) => {
        const timer = setTimeout(() => {
          const index = waiters.indexOf(done);
          if (index >= 0) waiters.splice(index, 1);
          reject(new Error(`no request to ${redirectUriPrefix} within ${timeoutMs} ms (page at ${page.url()})`));
        }, timeoutMs);
        const done = (hit: CapturedRequest) => {
          clearTimeout(timer);
          resolve(hit);
        };
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
