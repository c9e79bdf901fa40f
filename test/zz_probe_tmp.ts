import { launchBrowser, newPage, captureRedirect } from '/work/main/test/helpers/browser.ts';
import { startServer } from '/work/main/test/helpers/server.ts';
import { registerClient, authorizationUrl, REDIRECT_URI } from '/work/main/test/helpers/oauth.ts';
const server = await startServer();
const browser = await launchBrowser();
try {
  const client = await registerClient(server.issuer);
  const url = authorizationUrl(server.issuer, { client_id: client.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'api admin', state: 's' , code_challenge: 'a'.repeat(43), code_challenge_method: 'S256'});
  for (const mode of ['goto', 'location', 'goto-after-page']) {
    const { context, page } = await newPage(browser);
    const cap = await captureRedirect(page, REDIRECT_URI);
    page.on('request', (r) => console.log(mode, 'request', r.method(), r.url().slice(0, 60), r.redirectedFrom()?.url().slice(0, 40)));
    try {
      if (mode === 'goto') await page.goto(url);
      else if (mode === 'location') { await page.goto(server.origin + '/healthz'); await page.evaluate((u) => { location.href = u; }, url); await page.waitForTimeout(1000); }
      else { await page.goto(server.origin + '/healthz'); await page.goto(url); }
    } catch (e) { console.log(mode, 'ERR', (e as Error).message.split('\n')[0]); }
    console.log(mode, 'hits', cap.hits.length, page.url());
    await context.close();
  }
} finally { await browser.close(); await server.stop(); }
