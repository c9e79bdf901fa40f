import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { expect } from 'chai';

import { openStore } from '../../adapters/index.ts';
import { BackendUnavailableError, type Store } from '../../adapters/store.ts';
import { loadConfig } from '../../config/index.ts';
import { createService } from '../../src/http/app.ts';
import { loadKeyRing } from '../../src/keys/key_encryption.ts';
import { loadKeys } from '../../src/keys/keys.ts';
import { createLogger } from '../../src/shared/logger.ts';
import { RevocationList } from '../../src/tokens/revocation_list.ts';
import { codeRequest, registerClient, REDIRECT_URI } from '../support/oauth.ts';
import { freePort } from '../support/server.ts';
import { field, formAction, UserAgent } from '../support/user_agent.ts';

/**
 * The login and consent forms end their interaction with a redirect back to the engine. Like every
 * response, it waits for the store's commit: a browser sent on before it could reach an instance
 * that does not see the sign-in yet (WORKERS on one SQLite file), or be sent on with a sign-in or
 * consent that a failed commit did not keep. The service runs in this process on a real SQLite
 * file; its store's commit can be made to fail, as a full disk would make it.
 */
describe('login and consent: the redirect back to the engine waits for the store\'s commit', function () {
  this.timeout(30_000);

  let dir: string;
  let store: Store;
  let revocations: RevocationList;
  let server: Server;
  let origin: string;
  /** The store's next commit fails when set. */
  let failNextCommit = false;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oauth-interaction-commit-'));
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    const config = loadConfig({
      STORE: `sqlite:${join(dir, 'oauth.sqlite')}`, XDG_CONFIG_HOME: join(dir, 'config'), PORT: String(port), HOST: '127.0.0.1', BASE_URL: origin, METRICS: 'off',
    });
    store = openStore(config.store);
    const committing: Store = new Proxy(store, {
      get(target, name: keyof Store) {
        if (name !== 'committed') {
          const value = target[name];
          return typeof value === 'function' ? value.bind(target) : value;
        }
        return async () => {
          await target.committed();
          if (failNextCommit) {
            failNextCommit = false;
            throw new BackendUnavailableError('the commit failed');
          }
        };
      },
    });
    const logger = createLogger('silent');
    const keys = await loadKeys(store.settings, await loadKeyRing(config, logger), undefined);
    revocations = new RevocationList(store.revocations);
    await revocations.start();
    const { app, accounts } = createService({ config, store: committing, keys, revocations, logger, metrics: undefined });
    const workspace = await accounts.createWorkspace('Commit Ltd');
    await accounts.createMember({ email: 'commit@example.com', name: 'Commit User', password: 'a long enough password' }, workspace.id, 'admin');
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  });

  after(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server ? server.close(resolve) : resolve(undefined));
    revocations?.stop();
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** The form the page shows: where it posts, and the page's HTML to read its fields from. */
  async function formOf(response: Response): Promise<{ action: string; html: string }> {
    const html = await response.text();
    const action = formAction(html);
    expect(action, html.slice(0, 300)).to.be.a('string');
    return { action: new URL(action!, origin).href, html };
  }

  /** Posts the form once with the commit failing, then again: the first is 503 and sends the browser nowhere, the second redirects. */
  async function postWhileTheCommitFails(agent: UserAgent, action: string, form: Record<string, string>): Promise<string> {
    failNextCommit = true;
    const refused = await agent.request(action, { form });
    expect(refused.status, 'answered once the commit failed').to.equal(503);
    expect(refused.headers.get('location'), 'no redirect').to.equal(null);
    expect(failNextCommit, 'the commit was waited for').to.equal(false);

    const posted = await agent.request(action, { form });
    expect(posted.status).to.equal(303);
    return new URL(posted.headers.get('location')!, origin).href;
  }

  it('answers a login and a consent whose commit fails with 503, and the same forms again with the redirect', async () => {
    const client = await registerClient(origin, { client_name: 'Commit App' });
    const agent = new UserAgent();
    const { url } = codeRequest(origin, client.client_id);

    const login = await agent.follow(url, origin);
    const loginForm = await formOf(login.response);
    expect(loginForm.action).to.match(/\/login$/);
    const resume = await postWhileTheCommitFails(agent, loginForm.action, { csrf: field(loginForm.html, 'csrf')!, email: 'commit@example.com', password: 'a long enough password' });

    const consent = await agent.follow(resume, origin);
    const consentForm = await formOf(consent.response);
    expect(consentForm.action, 'the sign-in was kept: the consent page follows').to.match(/\/consent$/);
    const back = await postWhileTheCommitFails(agent, consentForm.action, { csrf: field(consentForm.html, 'csrf')!, decision: 'allow', workspace: field(consentForm.html, 'workspace')! });

    const callback = await agent.follow(back, origin);
    expect(callback.url.startsWith(REDIRECT_URI), callback.url).to.equal(true);
    expect(new URL(callback.url).searchParams.get('code')).to.be.a('string');
  });
});
