import { DatabaseSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';

import { expect } from 'chai';
import { RateLimiterRes } from 'rate-limiter-flexible';

import { openStore } from '../../adapters/index.ts';
import { generateApiKey } from '../../src/api_keys/format.ts';
import { api, createApiKey, userAccessToken } from '../support/data_api.ts';
import { basicCredentials, codeRequest, postCredentials, REDIRECT_URI, type RegisteredClient } from '../support/oauth.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { initialAccessToken, seedUser, startServer, type SeededUser, type TestServer } from '../support/server.ts';
import { authorize, UserAgent } from '../support/user_agent.ts';

const KEY_ENCRYPTION_KEY = Buffer.alloc(32, 11).toString('base64url');

/**
 * Small limits, so each is reached in a few requests, and locks of a second or two. The server
 * trusts one proxy, so each test speaks from addresses of its own (X-Forwarded-For).
 */
const LIMITS = {
  TRUST_PROXY: 'true',
  RATE_LIMIT_REGISTRATION: '2/1h',
  RATE_LIMIT_TOKEN_CLIENT: '3/1h',
  RATE_LIMIT_TOKEN_ADDRESS: '5/1h',
  RATE_LIMIT_LOGIN_ADDRESS: '6/1h',
  RATE_LIMIT_LOGIN_ACCOUNT: '2',
  RATE_LIMIT_LOGIN_LOCK: '1s',
  RATE_LIMIT_LOGIN_LOCK_MAX: '2s',
  RATE_LIMIT_DATA_API: '3/1h',
  RATE_LIMIT_CREDENTIAL_ADDRESS: '30/1h',
  RATE_LIMIT_INTERACTION_ADDRESS: '4/1h',
};

let lastAddress = 0;
/** A client address no other request of this run uses (TEST-NET-3). */
const newAddress = () => `203.0.113.${(lastAddress += 1)}`;

async function register(server: TestServer, address: string, metadata: Record<string, unknown> = {}, iat?: string): Promise<Response> {
  return fetch(`${server.issuer}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': address, origin: 'https://app.example', ...(iat ? { authorization: `Bearer ${iat}` } : {}) },
    body: JSON.stringify({ client_name: 'Limited App', redirect_uris: [REDIRECT_URI], ...metadata }),
  });
}

async function registered(server: TestServer, metadata: Record<string, unknown> = {}, iat?: string): Promise<RegisteredClient> {
  const response = await register(server, newAddress(), metadata, iat);
  expect(response.status, await response.clone().text()).to.equal(201);
  return response.json() as Promise<RegisteredClient>;
}

function token(server: TestServer, address: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.issuer}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address, ...headers },
    body: new URLSearchParams(form).toString(),
  });
}

/** A 429 in RFC 6749's JSON form, with a Retry-After of whole seconds no longer than `window`. */
async function expectOAuthTooMany(response: Response, window: number, description: RegExp): Promise<void> {
  expect(response.status).to.equal(429);
  expect(response.headers.get('content-type')).to.match(/^application\/json/);
  expect(response.headers.get('cache-control')).to.equal('no-store');
  expect(Number(response.headers.get('retry-after'))).to.be.within(1, window);
  const body = await response.json() as Record<string, unknown>;
  expect(body.error).to.equal('temporarily_unavailable');
  expect(body.error_description).to.match(description);
}

/** A browser at one address: keeps cookies, sends X-Forwarded-For, follows nothing by itself. */
class Browser {
  readonly address: string;
  readonly #cookies = new Map<string, string>();
  /** Cookies another page of the host set at a longer path: sent before the browser's own. */
  readonly #planted: string[] = [];

  constructor(address = newAddress()) {
    this.address = address;
  }

  /** `address` sends this one request from another address, with the same cookies. */
  async request(url: string, form?: Record<string, string>, address = this.address): Promise<Response> {
    const headers: Record<string, string> = {
      cookie: [...this.#planted, ...[...this.#cookies].map(([name, value]) => `${name}=${value}`)].join('; '),
      'x-forwarded-for': address,
      ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
    };
    const response = await fetch(url, { method: form ? 'POST' : 'GET', headers, body: form && new URLSearchParams(form).toString(), redirect: 'manual' });
    for (const cookie of response.headers.getSetCookie()) {
      const [pair = ''] = cookie.split(';');
      const eq = pair.indexOf('=');
      this.#cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return response;
  }

  /** Another browser holding the cookies this one holds now, from another address (a thief's copy). */
  copy(): Browser {
    const copy = new Browser();
    for (const [name, value] of this.#cookies) copy.setCookie(name, value);
    return copy;
  }

  /** The value of the cookie `name` it holds. */
  cookie(name: string): string | undefined {
    return this.#cookies.get(name);
  }

  /** Holds `value` for the cookie `name` from now on (a cookie copied from another browser, or made up). */
  setCookie(name: string, value: string): void {
    this.#cookies.set(name, value);
  }

  /** A cookie `name` that another page of the host (a sibling subdomain, another port) set at a longer path: sent first, beside the browser's own. */
  plant(name: string, value: string): void {
    this.#planted.push(`${name}=${value}`);
  }
}

interface LoginForm {
  action: string;
  csrf: string;
}

interface SignInAnswer {
  status: number;
  retryAfter: string | null;
  /** The page's error message, as shown. */
  error: string | undefined;
  form: LoginForm | undefined;
}

const readForm = (html: string, origin: string): LoginForm | undefined => {
  const action = /<form method="post" action="([^"]+)"/.exec(html)?.[1];
  const csrf = /name="csrf" value="([^"]*)"/.exec(html)?.[1];
  return action && csrf ? { action: new URL(action, origin).href, csrf } : undefined;
};

/** Starts an authorization request in the browser and follows it to the login page. */
async function openLogin(browser: Browser, server: TestServer, client: RegisteredClient, origin = server.origin): Promise<LoginForm> {
  let url = codeRequest(server.issuer, client.client_id, { prompt: 'login' }).url.replace(server.origin, origin);
  for (let hops = 0; hops < 5; hops += 1) {
    const response = await browser.request(url);
    const location = response.headers.get('location');
    if (!location) {
      const form = readForm(await response.text(), origin);
      if (!form) throw new Error(`no login form at ${url} (${response.status})`);
      return form;
    }
    url = new URL(location, url).href.replace(server.origin, origin);
  }
  throw new Error('the login page was not reached');
}

async function signIn(browser: Browser, form: LoginForm, email: string, password: string, address?: string): Promise<SignInAnswer> {
  const response = await browser.request(form.action, { csrf: form.csrf, email, password }, address);
  const html = response.status === 303 ? '' : await response.text();
  const error = /<p class="error" role="alert"[^>]*>([^<]*)<\/p>/.exec(html)?.[1];
  return { status: response.status, retryAfter: response.headers.get('retry-after'), error, form: readForm(html, new URL(form.action).origin) ?? form };
}

/** Signs in until the lock lifts: each refusal waits the Retry-After it names. */
async function signInOnceUnlocked(browser: Browser, form: LoginForm, email: string, password: string): Promise<SignInAnswer> {
  const deadline = Date.now() + 15_000;
  for (let answer = await signIn(browser, form, email, password); ; answer = await signIn(browser, answer.form!, email, password)) {
    if (answer.status !== 429 || Date.now() > deadline) return answer;
    await sleep(Number(answer.retryAfter) * 1000);
  }
}

/** Follows the redirects on `server` from `url` until a page is shown: its address and HTML. */
async function follow(browser: Browser, server: TestServer, url: string): Promise<{ url: string; html: string }> {
  for (let hops = 0; hops < 10; hops += 1) {
    const response = await browser.request(url);
    const location = response.headers.get('location');
    if (!location) return { url, html: await response.text() };
    url = new URL(location, url).href;
    if (!url.startsWith(server.origin)) throw new Error(`left the server for ${url}`);
  }
  throw new Error('too many redirects');
}

/** Log lines (JSON) matching `message`, waiting a moment for the asynchronously written log. */
async function logLines(server: TestServer, message: string, where: (line: Record<string, unknown>) => boolean, count = 1): Promise<Array<Record<string, unknown>>> {
  const deadline = Date.now() + 3000;
  for (;;) {
    const lines = server.logs().split('\n').filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.message === message && where(line));
    if (lines.length >= count || Date.now() > deadline) return lines;
    await sleep(50);
  }
}

describe('rate limits', function () {
  this.timeout(60_000);

  let server: TestServer;
  let user: SeededUser;
  let app: RegisteredClient;

  before(async () => {
    server = await startServer({ env: LIMITS });
    user = await seedUser(server);
    app = await registered(server);
  });

  after(async () => {
    await server?.stop();
  });

  describe('registration, per client address', () => {
    it('answers 429 in RFC 6749 JSON with Retry-After past the limit, readable by a browser client; another address still registers', async () => {
      const address = newAddress();
      for (let i = 0; i < 2; i += 1) expect((await register(server, address)).status, `registration ${i + 1}`).to.equal(201);
      const refused = await register(server, address);
      expect(refused.headers.get('access-control-allow-origin')).to.equal('*');
      expect(refused.headers.get('access-control-expose-headers')).to.match(/\bRetry-After\b/);
      await expectOAuthTooMany(refused, 3600, /too many client registrations from this address/);
      expect((await register(server, newAddress())).status).to.equal(201);
    });
  });

  describe('token endpoint', () => {
    let machine: RegisteredClient;

    before(async () => {
      machine = await registered(server, { grant_types: ['client_credentials'], redirect_uris: [] }, await initialAccessToken(server, user.workspaces[0]!.id));
    });

    it('per client: past the tokens it may be issued the client gets 429 from any address and by any authentication method, another client does not', async () => {
      const grant = { grant_type: 'client_credentials', scope: 'api' };
      for (let i = 0; i < 5; i += 1) {
        const guess = await token(server, newAddress(), { ...grant, client_id: machine.client_id, client_secret: `guess-${i}` });
        expect(guess.status, 'without its secret: refused, and none of its allowance used').to.equal(401);
      }
      for (let i = 0; i < 3; i += 1) {
        const issued = await token(server, newAddress(), { ...grant, client_id: machine.client_id, client_secret: machine.client_secret! });
        expect(issued.status, `request ${i + 1}`).to.equal(200);
        expect(await issued.json()).to.have.property('access_token');
      }
      await expectOAuthTooMany(
        await token(server, newAddress(), { ...grant, client_id: machine.client_id, client_secret: machine.client_secret! }),
        3600, /too many tokens issued to this client/,
      );
      expect((await token(server, newAddress(), grant, basicCredentials(machine))).status, 'HTTP Basic').to.equal(429);

      const other = await token(server, newAddress(), { grant_type: 'refresh_token', refresh_token: 'not-a-token', client_id: app.client_id, client_secret: app.client_secret! });
      expect(other.status).to.equal(400);
      expect(await other.json()).to.include({ error: 'invalid_grant' });
    });

    it('per address: past the limit the address gets 429 whichever client it names, or none', async () => {
      const address = newAddress();
      for (let i = 0; i < 4; i += 1) {
        const refused = await token(server, address, { grant_type: 'client_credentials', client_id: `unknown-${i}`, client_secret: 'x' });
        expect(refused.status, `request ${i + 1}`).to.equal(401);
      }
      expect((await token(server, address, { grant_type: 'client_credentials' })).status, 'naming no client').to.equal(401);
      const refused = await token(server, address, { grant_type: 'client_credentials', client_id: 'unknown-5', client_secret: 'x' }, { origin: 'https://spa.example' });
      expect(refused.headers.get('access-control-allow-origin'), 'a browser client can read it').to.equal('*');
      expect(refused.headers.get('access-control-expose-headers')).to.equal('Retry-After');
      await expectOAuthTooMany(refused, 3600, /too many token requests from this address/);
      expect((await token(server, newAddress(), { grant_type: 'client_credentials', client_id: 'unknown-6', client_secret: 'x' })).status).to.equal(401);
    });
  });

  describe('the sign-in form', () => {
    it('locks an account after consecutive failures, refuses even the right password while locked, and lets it in once the lock has lifted', async () => {
      const browser = new Browser();
      const form = await openLogin(browser, server, app);
      const first = await signIn(browser, form, user.email, 'wrong password 1');
      expect(first.status).to.equal(400);
      expect(first.error).to.match(/not right/);

      const locking = await signIn(browser, first.form!, user.email, 'wrong password 2');
      expect(locking.status).to.equal(429);
      expect(locking.retryAfter).to.equal('1');
      expect(locking.error).to.equal('Too many sign-in attempts with this email address have failed, so signing in with it is paused for 1 second. Try again after that.');
      expect(locking.form, 'the form is shown again').to.not.equal(undefined);

      const right = await signIn(browser, locking.form!, user.email, user.password);
      expect(right.status, 'the right password during the lock').to.equal(429);
      expect(right.error).to.match(/^Too many sign-in attempts with this email address have failed, so signing in with it is paused for \d+ seconds?\. Try again after that\.$/);

      const unlocked = await signInOnceUnlocked(browser, right.form!, user.email, user.password);
      expect(unlocked.status, 'signed in after the lock').to.equal(303);

      // The success cleared the count: one failure now is only a failure.
      const again = await openLogin(browser, server, app);
      expect((await signIn(browser, again, user.email, 'wrong again')).status).to.equal(400);
    });

    it('locks an email no account has exactly as it locks a real one: the same status, wait and words', async () => {
      const browser = new Browser();
      const form = await openLogin(browser, server, app);
      const answers = [];
      for (const email of [`nobody-${Date.now()}@example.com`, (await seedUser(server)).email]) {
        await signIn(browser, form, email, 'wrong password 1');
        answers.push(await signIn(browser, form, email, 'wrong password 2'));
      }
      const [unknown, known] = answers;
      expect(unknown!.status).to.equal(429);
      expect([unknown!.status, unknown!.retryAfter, unknown!.error]).to.deep.equal([known!.status, known!.retryAfter, known!.error]);
    });

    it('locks one account, not another whose email differs from it only in the case of a letter outside ASCII (the store tells the two apart)', async () => {
      const stamp = Date.now();
      const [locked, other] = [`ÖLA-${stamp}@example.com`, `öla-${stamp}@example.com`];
      for (const email of [locked, other]) {
        const created = await server.admin(['user', 'create', '--email', email, '--name', 'Ola', '--workspace', user.workspaces[0]!.id, '--role', 'member', '--password-stdin'], 'pw-ola-correct-horse\n');
        expect(created.code, `${email}: ${created.stderr}`).to.equal(0);
      }
      const browser = new Browser();
      const form = await openLogin(browser, server, app);
      await signIn(browser, form, locked, 'wrong password 1');
      expect((await signIn(browser, form, locked, 'wrong password 2')).status, 'the first account is locked').to.equal(429);
      const elsewhere = new Browser();
      expect((await signIn(elsewhere, await openLogin(elsewhere, server, app), other, 'pw-ola-correct-horse')).status, 'the other account signs in').to.equal(303);
      // Its own spellings, ASCII letters in any case, are the one account and its one lock.
      const again = new Browser();
      expect((await signIn(again, await openLogin(again, server, app), `ÖlA-${stamp}@EXAMPLE.com`, 'pw-ola-correct-horse')).status).to.equal(429);
      // So is the address with its accent typed apart (an O and a combining diaeresis).
      const decomposed = new Browser();
      expect((await signIn(decomposed, await openLogin(decomposed, server, app), locked.normalize('NFD'), 'pw-ola-correct-horse')).status).to.equal(429);
    });

    it('lets in every one of several sign-ins of one account made at once', async () => {
      const person = await seedUser(server);
      const browsers = Array.from({ length: 8 }, () => new Browser());
      const forms = await Promise.all(browsers.map((browser) => openLogin(browser, server, app)));
      const answers = await Promise.all(browsers.map((browser, i) => signIn(browser, forms[i]!, person.email, person.password)));
      expect(answers.map(({ status }) => status)).to.deep.equal(Array(8).fill(303));
    });

    it('once an account has been locked, lets one attempt at a time check a password, however many are sent at once', async () => {
      const target = await seedUser(server);
      const browser = new Browser();
      const form = await openLogin(browser, server, app);
      await signIn(browser, form, target.email, 'wrong password 1');
      const locked = await signIn(browser, form, target.email, 'wrong password 2');
      expect(locked.status).to.equal(429);
      await sleep(Number(locked.retryAfter) * 1000 + 100);

      const burstAddresses = Array.from({ length: 8 }, () => newAddress());
      const burst = await Promise.all(burstAddresses.map((address, i) => signIn(browser, form, target.email, `wrong password ${i + 3}`, address)));
      expect(burst.map(({ status }) => status), 'refused, or checked and then locked').to.deep.equal(Array(8).fill(429));
      const logged = await logLines(server, 'sign-in failed', (line) => line.user_id === target.id, 3);
      const refused = await logLines(server, 'sign-in refused', (line) => burstAddresses.includes(String(line.ip)), 7);
      expect([logged.length, refused.length], 'failures checked, attempts refused').to.deep.equal([3, 7]);
    });

    it('logs each failed sign-in with the user\'s id and the address, never the password, nor an email field\'s text that names no one', async () => {
      const browser = new Browser();
      const form = await openLogin(browser, server, app);
      const person = await seedUser(server);
      const password = `a-secret-typo-${Date.now()}`;
      await signIn(browser, form, `  ${person.email.toUpperCase()} `, password);
      const [line] = await logLines(server, 'sign-in failed', (entry) => entry.ip === browser.address);
      expect(line, server.logs()).to.include({ level: 'warn', user_id: person.id, ip: browser.address });
      expect(server.logs()).to.not.include(password);

      // The password typed into the email field (it may look like an email), then the email into the password field.
      const elsewhere = new Browser();
      const swapped = `${person.password.slice(0, 6)}@Typo-${Date.now()}.example`;
      await signIn(elsewhere, await openLogin(elsewhere, server, app), swapped, person.email);
      const [unnamed] = await logLines(server, 'sign-in failed', (entry) => entry.ip === elsewhere.address);
      expect(unnamed, server.logs()).to.include({ level: 'warn', ip: elsewhere.address }).and.not.have.property('user_id');
      expect(server.logs().toLowerCase()).to.not.include(swapped.toLowerCase());
    });

    it('per address: past the failed sign-ins of one address, no one signs in from it, whatever the account; another address is unaffected', async () => {
      const person = await seedUser(server);
      const browser = new Browser();
      const form = await openLogin(browser, server, app);
      for (let i = 0; i < 6; i += 1) {
        expect((await signIn(browser, form, `guess-${i}-${Date.now()}@example.com`, 'wrong')).status, `failure ${i + 1}`).to.equal(400);
      }
      const refused = await signIn(browser, form, person.email, person.password);
      expect(refused.status).to.equal(429);
      expect(Number(refused.retryAfter)).to.be.within(1, 3600);
      expect(refused.error).to.match(/^Too many sign-in attempts from your network have failed, so signing in from it is paused for \d+ (hours?|minutes?|seconds?)\. Try again after that\.$/);

      const elsewhere = new Browser();
      expect((await signIn(elsewhere, await openLogin(elsewhere, server, app), person.email, person.password)).status).to.equal(303);
    });

    describe('from a known device: a browser that signed in to the account before', function () {
      // Locks that outlast each test: nothing here waits for one to lift.
      let devices: TestServer;
      let client: RegisteredClient;

      before(async () => {
        devices = await startServer({ env: { ...LIMITS, RATE_LIMIT_LOGIN_LOCK: '1m', RATE_LIMIT_LOGIN_LOCK_MAX: '1h' } });
        client = await registered(devices);
      });

      after(async () => {
        await devices?.stop();
      });

      /** Failed sign-ins from a browser of their own, until the account is locked. */
      async function lockOut(email: string): Promise<void> {
        const guesser = new Browser();
        const form = await openLogin(guesser, devices, client);
        expect((await signIn(guesser, form, email, 'a guess 1')).status).to.equal(400);
        expect((await signIn(guesser, form, email, 'a guess 2')).status, 'the account is locked').to.equal(429);
      }

      /** A browser that signed in to `person`'s account on the sign-in page. */
      async function knownDevice(person: SeededUser): Promise<Browser> {
        const browser = new Browser();
        expect((await signIn(browser, await openLogin(browser, devices, client), person.email, person.password)).status).to.equal(303);
        return browser;
      }

      const LOCKED = /^Too many sign-in attempts with this email address have failed, so signing in with it is paused for 1 minute\. Try again after that\.$/;

      it('signs in with the right password while failures from elsewhere keep the account locked, and gets a session; a fresh browser is still refused', async () => {
        const person = await seedUser(devices);
        const own = await knownDevice(person);
        await lockOut(person.email);

        const form = await openLogin(own, devices, client);
        const signedIn = await own.request(form.action, { csrf: form.csrf, email: person.email, password: person.password });
        expect(signedIn.status, 'the right password from the known device, during the lock').to.equal(303);
        // Signed in: the consent page of this account's session comes next.
        const consent = await follow(own, devices, new URL(signedIn.headers.get('location')!, form.action).href);
        expect(consent.html, consent.url).to.match(/<form method="post" action="[^"]+\/consent"/);

        // Its sign-ins cleared nothing of the account's lock: everyone else is still refused.
        const fresh = new Browser();
        const refused = await signIn(fresh, await openLogin(fresh, devices, client), person.email, person.password);
        expect(refused.status).to.equal(429);
        expect(refused.error).to.match(LOCKED);
      });

      it('is refused too once its own failures reach RATE_LIMIT_LOGIN_ACCOUNT; another account\'s browser, an entry changed or moved to another account, a garbled cookie never help', async () => {
        const person = await seedUser(devices);
        const own = await knownDevice(person);
        const otherAccounts = await knownDevice(await seedUser(devices));
        await lockOut(person.email);

        const value = own.cookie('known_devices');
        expect(value, 'the known device\'s cookie').to.be.a('string');
        const entries = JSON.parse(Buffer.from(value!, 'base64url').toString()) as unknown[][];
        const [[otherId, otherMac, otherAt]] = JSON.parse(Buffer.from(otherAccounts.cookie('known_devices')!, 'base64url').toString()) as unknown[][] as [[string, string, number]];
        const holding = (forged: unknown[][]): Browser => {
          const browser = new Browser();
          browser.setCookie('known_devices', Buffer.from(JSON.stringify(forged)).toString('base64url'));
          return browser;
        };
        // Kept for longer: an entry's time is its own to vouch for.
        const extended = holding(entries.map(([id, of, at]) => [id, of, Number(at) + 1]));
        // The other account's entry under this one's device id, or this one's binding under the other's id and time.
        const moved = holding([[entries[0]![0], otherMac, otherAt], [otherId, entries[0]![1], otherAt]]);
        const garbled = new Browser();
        garbled.setCookie('known_devices', '%%not-a-cookie%%');
        garbled.setCookie('known_devices.sig', 'forged');
        for (const [name, browser] of [['another account\'s browser', otherAccounts], ['an entry given a later time', extended], ['entries moved between accounts', moved], ['a garbled one', garbled]] as const) {
          const answer = await signIn(browser, await openLogin(browser, devices, client), person.email, person.password);
          expect([answer.status, answer.error], name).to.satisfy(([status, error]: [number, string]) => status === 429 && LOCKED.test(error));
        }

        // The known device's own failures: checked, counted against it, then it is locked too.
        const form = await openLogin(own, devices, client);
        const first = await signIn(own, form, person.email, 'my typo 1');
        expect([first.status, first.error], 'checked during the lock, and not right').to.deep.equal([400, 'The email or password is not right.']);
        const locking = await signIn(own, first.form!, person.email, 'my typo 2');
        expect(locking.status).to.equal(429);
        expect(locking.error).to.match(LOCKED);
        expect((await signIn(own, locking.form!, person.email, person.password)).status, 'the right password, from the device now locked').to.equal(429);

        const [failed] = await logLines(devices, 'sign-in failed', (line) => line.user_id === person.id && line.ip === own.address);
        expect(failed).to.include({ known_device: true, failures: 1 });
        const [locked] = await logLines(devices, 'sign-in locked', (line) => line.user_id === person.id && line.ip === own.address);
        expect(locked).to.include({ known_device: true, seconds: 60 });
        expect(devices.logs(), 'no device id in the logs').to.not.include(String(entries[0]![0]));
      });

      it('counts its own cookie whatever another page of the host planted before it: another account\'s cookie, or garbage, sent first', async () => {
        const person = await seedUser(devices);
        const own = await knownDevice(person);
        const otherAccounts = await knownDevice(await seedUser(devices));
        await lockOut(person.email);

        own.plant('known_devices', otherAccounts.cookie('known_devices')!);
        own.plant('known_devices', 'garbage');
        own.plant('known_devices.sig', 'forged');
        const answer = await signIn(own, await openLogin(own, devices, client), person.email, person.password);
        expect(answer.status, 'the known device, its own cookie sent after the planted ones, during the lock').to.equal(303);
      });

      it('is no known device of a user deleted and created again with the same email', async () => {
        const person = await seedUser(devices, []);
        const own = await knownDevice(person);
        const store = openStore(devices.store);
        try {
          expect(await store.accounts.deleteUser(person.id), 'deleted').to.equal(true);
        } finally {
          await store.close();
        }
        const again = await seedUser(devices, [], { email: person.email });
        await lockOut(person.email);
        const answer = await signIn(own, await openLogin(own, devices, client), again.email, again.password);
        expect([answer.status, answer.error], 'the old user\'s browser, during the new user\'s lock').to.satisfy(([status, error]: [number, string]) => status === 429 && LOCKED.test(error));
      });

      it('sets its cookie HttpOnly and SameSite=Lax for the sign-in form and the password change only, for 180 days, naming no email; the password change checks the password from it during a lock, and ends every other browser\'s known status but its own', async () => {
        const person = await seedUser(devices);
        const own = new Browser();
        const login = await follow(own, devices, `${devices.issuer}/settings/password`);
        const form = readForm(login.html, devices.origin)!;
        const posted = await own.request(form.action, { csrf: form.csrf, email: person.email, password: person.password });
        expect(posted.status).to.equal(303);
        const cookies = posted.headers.getSetCookie().filter((cookie) => cookie.startsWith('known_devices='));
        expect(cookies.map((cookie) => /; path=([^;]*)/.exec(cookie)?.[1])).to.deep.equal(['/interaction', '/settings/password']);
        for (const cookie of cookies) {
          expect(cookie).to.match(/; httponly(;|$)/).and.match(/; samesite=lax(;|$)/);
          const days = (Date.parse(/; expires=([^;]*)/.exec(cookie)![1]!) - Date.now()) / 86_400_000;
          expect(days).to.be.within(179.9, 180.1);
        }
        const value = own.cookie('known_devices')!;
        const stored = `${value} ${Buffer.from(value, 'base64url').toString()}`.toLowerCase();
        expect(stored).to.not.include(person.email.split('@')[0]!.toLowerCase());

        // The browser's cookies copied before the password change (a thief's copy).
        const copy = own.copy();
        const settings = await follow(own, devices, new URL(posted.headers.get('location')!, devices.origin).href);
        expect(settings.url).to.equal(`${devices.issuer}/settings/password`);
        await lockOut(person.email);
        const csrf = /name="csrf" value="([^"]*)"/.exec(settings.html)![1]!;
        const newPassword = 'a-new-long-password-42';
        const changed = await own.request(`${devices.issuer}/settings/password`, {
          csrf, current_password: person.password, new_password: newPassword, confirm_password: newPassword,
        });
        expect(changed.status, 'the current password checked during the lock').to.equal(303);
        expect(changed.headers.get('location')).to.match(/done=password-changed/);

        const copied = await signIn(copy, await openLogin(copy, devices, client), person.email, newPassword);
        expect([copied.status, copied.error], 'the copy made before the change, during the lock').to.satisfy(([status, error]: [number, string]) => status === 429 && LOCKED.test(error));
        expect((await signIn(own, await openLogin(own, devices, client), person.email, newPassword)).status, 'the browser that changed it, during the lock').to.equal(303);
      });
    });
  });

  describe('data API, per credential', () => {
    it('answers its own JSON 429 with Retry-After past the limit; another credential of the same workspace is unaffected', async () => {
      const workspace = user.workspaces[0]!.id;
      const [limited, other] = [await createApiKey(server, workspace), await createApiKey(server, workspace)];
      for (let i = 0; i < 3; i += 1) expect((await api(server, '/rest/companies', { credential: limited.key })).status, `request ${i + 1}`).to.equal(200);
      const refused = await api(server, '/rest/companies', { credential: limited.key, headers: { origin: 'https://app.example' } });
      expect(refused.status).to.equal(429);
      expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3600);
      expect(refused.headers.get('access-control-expose-headers')).to.match(/\bRetry-After\b/);
      expect(refused.body.error).to.equal('too_many_requests');
      expect(refused.body.error_description).to.match(/too many requests with this credential/);
      expect((await api(server, '/rest/companies', { credential: other.key })).status).to.equal(200);
    });
  });

  describe('client addresses: an IPv6 network of RATE_LIMIT_IPV6_PREFIX bits is one address', () => {
    it('sign-ins: failures from ::1 to ::6 of one /64 share the count, so ::7 is refused; another /64 still signs in', async () => {
      const person = await seedUser(server);
      const network = '2001:db8:1234:5678';
      const browser = new Browser(`${network}::1`);
      const form = await openLogin(browser, server, app);
      for (let i = 1; i <= 6; i += 1) {
        const failed = await signIn(browser, form, `guess-${i}-${Date.now()}@example.com`, 'wrong', `${network}::${i}`);
        expect(failed.status, `failure from ${network}::${i}`).to.equal(400);
      }
      const refused = await signIn(browser, form, person.email, person.password, `${network}::7`);
      expect(refused.status).to.equal(429);
      expect(refused.error).to.match(/^Too many sign-in attempts from your network have failed/);

      const elsewhere = new Browser(`${network.replace(/5678$/, '5679')}::1`);
      expect((await signIn(elsewhere, await openLogin(elsewhere, server, app), person.email, person.password)).status).to.equal(303);
    });

    it('registrations: an IPv4-mapped address counts as its IPv4 address, and the addresses of one /64 as one', async () => {
      expect((await register(server, '::ffff:198.51.100.7')).status).to.equal(201);
      expect((await register(server, '198.51.100.7')).status).to.equal(201);
      await expectOAuthTooMany(await register(server, '::ffff:198.51.100.7'), 3600, /too many client registrations from this address/);
      expect((await register(server, '198.51.100.8')).status, 'the next IPv4 address').to.equal(201);

      expect((await register(server, '2001:db8:aaaa:1::1')).status).to.equal(201);
      expect((await register(server, '2001:db8:aaaa:1:8000::2')).status).to.equal(201);
      await expectOAuthTooMany(await register(server, '2001:db8:aaaa:1:ffff:ffff:ffff:ffff'), 3600, /too many client registrations from this address/);
      expect((await register(server, '2001:db8:aaaa:2::1')).status, 'the next /64').to.equal(201);
    });
  });

  describe('failed credentials, per client address', () => {
    /** 60 requests from addresses of one /64, as `send` makes them: their statuses in order. */
    async function flood(network: string, send: (address: string) => Promise<{ status: number }>): Promise<number[]> {
      const statuses: number[] = [];
      for (let i = 1; i <= 60; i += 1) statuses.push((await send(`${network}::${i.toString(16)}`)).status);
      return statuses;
    }

    it('data API and /mcp: past 30 failed keys each further one gets 429 with Retry-After in the data API\'s error; a valid key from the same address is still served', async () => {
      const network = '2001:db8:c0de:1';
      const valid = await createApiKey(server, user.workspaces[0]!.id);
      const from = (address: string) => ({ 'x-forwarded-for': address, origin: 'https://app.example' });
      const statuses = await flood(network, (address) => api(server, '/rest/companies', { credential: generateApiKey(), headers: from(address) }));
      expect(statuses).to.deep.equal([...Array(30).fill(401), ...Array(30).fill(429)]);

      const refused = await api(server, '/rest/companies', { credential: generateApiKey(), headers: from(`${network}::61`) });
      expect(refused.status).to.equal(429);
      expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3600);
      expect(refused.headers.get('access-control-expose-headers')).to.match(/\bRetry-After\b/);
      expect(refused.headers.get('www-authenticate'), 'the challenge still says the key is bad').to.contain('error="invalid_token"');
      expect(refused.body.error).to.equal('invalid_token');
      expect(refused.body.error_description).to.match(/^the API key is invalid, expired or revoked; too many failed credentials from this address \(at most 30 in 1 hour\); retry after/);

      const served = await api(server, '/rest/companies', { credential: valid.key, headers: from(`${network}::62`) });
      expect(served.status, 'a valid key from the flooded address').to.equal(200);
      const mcp = await api(server, '/mcp', { credential: generateApiKey(), json: { jsonrpc: '2.0', id: 1, method: 'ping' }, headers: { 'x-forwarded-for': `${network}::63`, accept: 'application/json, text/event-stream' } });
      expect(mcp.status, '/mcp counts with the data API').to.equal(429);
      expect((await api(server, '/rest/companies', { credential: generateApiKey(), headers: from('2001:db8:c0de:2::1') })).status, 'another /64').to.equal(401);
    });

    it('userinfo: past the limit a token that does not verify gets 429 in RFC 6750\'s challenge; a valid token from the same address is still answered', async () => {
      const network = '2001:db8:c0de:3';
      const client = await registered(server, { application_type: 'web', token_endpoint_auth_method: 'client_secret_post' });
      const { access_token: token } = await userAccessToken(server, client, user, 'api profile');
      const userinfo = (credential: string, address: string) =>
        fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${credential}`, 'x-forwarded-for': address } });
      const forged = `${token.slice(0, -8)}AAAAAAAA`;
      const statuses = await flood(network, (address) => userinfo(forged, address));
      expect(statuses).to.deep.equal([...Array(30).fill(401), ...Array(30).fill(429)]);

      const refused = await userinfo(forged, `${network}::61`);
      expect(refused.status).to.equal(429);
      expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3600);
      expect(refused.headers.get('www-authenticate')).to.match(/^Bearer realm="oauth", error="invalid_token"/);
      expect(await refused.json()).to.include({ error: 'invalid_token' });

      const answered = await userinfo(token, `${network}::62`);
      expect(answered.status, 'a valid token from the flooded address').to.equal(200);
      expect(await answered.json()).to.include({ sub: user.id });
      expect((await userinfo(forged, '2001:db8:c0de:4::1')).status, 'another /64').to.equal(401);
    });

    it('a good token sent to another API than its own is not a failed credential: never 429, however often (data API, /mcp, userinfo)', async () => {
      const network = '2001:db8:c0de:5';
      const client = await registered(server, { application_type: 'web', token_endpoint_auth_method: 'client_secret_post' });
      const { access_token: mcpToken } = await userAccessToken(server, client, user, 'api profile', `${server.issuer}/mcp`);
      const { access_token: dataApiToken } = await userAccessToken(server, client, user, 'api profile');
      const mcpAnswers = { accept: 'application/json, text/event-stream' };
      const atDataApi = await flood(network, (address) => api(server, '/rest/companies', { credential: mcpToken, headers: { 'x-forwarded-for': address } }));
      const atMcp = await flood(network, (address) => api(server, '/mcp', { credential: dataApiToken, json: { jsonrpc: '2.0', id: 1, method: 'ping' }, headers: { 'x-forwarded-for': address, ...mcpAnswers } }));
      const atUserinfo = await flood(network, (address) => fetch(`${server.issuer}/oauth/userinfo`, { headers: { authorization: `Bearer ${mcpToken}`, 'x-forwarded-for': address } }));
      expect([...new Set(atDataApi)], 'data API').to.deep.equal([401]);
      expect([...new Set(atMcp)], '/mcp').to.deep.equal([401]);
      expect([...new Set(atUserinfo)], 'userinfo').to.deep.equal([401]);
    });

    it('introspection: past the limit a failed client authentication gets 429 with Retry-After in RFC 6749\'s error; a client that authenticates from the same address is answered', async () => {
      const network = '2001:db8:c0de:5';
      const client = await registered(server, { application_type: 'web', token_endpoint_auth_method: 'client_secret_post' });
      const introspect = (credentials: Record<string, string>, address: string) => fetch(`${server.issuer}/oauth/introspect`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address },
        body: new URLSearchParams({ token: 'some-token', ...credentials }).toString(),
      });
      const wrong = { client_id: client.client_id, client_secret: 'not-its-secret' };
      const statuses = await flood(network, (address) => introspect(wrong, address));
      expect(statuses).to.deep.equal([...Array(30).fill(401), ...Array(30).fill(429)]);

      const refused = await introspect(wrong, `${network}::61`);
      expect(refused.status).to.equal(429);
      expect(refused.headers.get('content-type')).to.match(/^application\/json/);
      expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3600);
      const body = await refused.json() as Record<string, unknown>;
      expect(body.error).to.equal('invalid_client');
      expect(body.error_description).to.match(/too many failed credentials from this address/);

      const answered = await introspect(postCredentials(client), `${network}::62`);
      expect(answered.status, 'the client with its secret, from the flooded address').to.equal(200);
      expect(await answered.json()).to.deep.equal({ active: false });
      expect((await introspect(wrong, '2001:db8:c0de:6::1')).status, 'another /64').to.equal(401);
    });
  });

  /** How many records of an engine model the SQLite file holds. */
  const storedRecords = (model: string) => {
    const db = new DatabaseSync(server.store.slice('sqlite:'.length), { readOnly: true });
    try {
      return (db.prepare('SELECT count(*) AS n FROM oidc_models WHERE model = ?').get(model) as { n: number }).n;
    } finally {
      db.close();
    }
  };

  describe('authorization requests that open a sign-in page, per client address', () => {
    const interactionRecords = () => storedRecords('Interaction');
    const anonymous = (address: string, client = app) =>
      fetch(codeRequest(server.issuer, client.client_id).url, { headers: { 'x-forwarded-for': address }, redirect: 'manual' });

    it('past the limit answers the error page with 429 and Retry-After, stores no interaction and sets no cookie; another address still opens one', async () => {
      const network = '2001:db8:1a7e:1';
      for (let i = 1; i <= 4; i += 1) {
        const opened = await anonymous(`${network}::${i}`);
        expect(opened.status, `request ${i}`).to.equal(303);
        expect(opened.headers.get('location')).to.match(/\/interaction\/[\w-]+$/);
      }
      const stored = interactionRecords();
      const refused = await anonymous(`${network}::5`);
      expect(refused.status).to.equal(429);
      expect(refused.headers.get('content-type')).to.match(/^text\/html/);
      expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3600);
      expect(refused.headers.get('location'), 'not sent to the client').to.equal(null);
      expect(refused.headers.getSetCookie(), 'no interaction cookie').to.deep.equal([]);
      const page = await refused.text();
      expect(page).to.include('<h1>Too many requests</h1>');
      expect(page).to.match(/Too many sign-in pages were opened from your network in a short time\. Try again in \d+ (second|minute|hour)s?\./);
      expect(interactionRecords(), 'interaction records after the refusal').to.equal(stored);

      expect((await anonymous('2001:db8:1a7e:2::1')).status, 'another /64').to.equal(303);
      expect(interactionRecords()).to.equal(stored + 1);
    });

    it('never refuses a request that opens no page: a signed-in user whose application has consent gets a code from a spent address', async () => {
      const address = '2001:db8:1a7e:3::1';
      const client = await registered(server, { application_type: 'web', token_endpoint_auth_method: 'client_secret_post' });
      const person = await seedUser(server);
      const agent = new UserAgent({ 'x-forwarded-for': address });
      const first = await authorize(agent, codeRequest(server.issuer, client.client_id).url, server.origin, { email: person.email, password: person.password });
      expect(first.searchParams.get('code'), 'signed in, consented').to.be.a('string');
      for (let i = 0; i < 3; i += 1) expect((await anonymous(address)).status, `anonymous request ${i + 1}`).to.equal(303);
      expect((await anonymous(address)).status, 'the address is spent').to.equal(429);

      const again = await agent.follow(codeRequest(server.issuer, client.client_id).url, server.origin);
      expect(again.response.status).to.equal(303);
      expect(new URL(again.url).searchParams.get('code'), `sent back with a code, not refused: ${again.url}`).to.be.a('string');
    });
  });

  describe('forms posted to the authorization and logout endpoints, per client address', () => {
    const parkedForms = () => storedRecords('PostedForm');
    const postForm = (path: string, address: string) => fetch(`${server.issuer}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address },
      body: new URLSearchParams(codeRequest(server.issuer, app.client_id).params).toString(),
      redirect: 'manual',
    });
    const anonymousAuthorization = (address: string) =>
      fetch(codeRequest(server.issuer, app.client_id).url, { headers: { 'x-forwarded-for': address }, redirect: 'manual' });

    it('past the limit (the sign-in pages\' rate, counted apart) answers the error page with 429 and Retry-After and keeps no form; another address still posts', async () => {
      const network = '2001:db8:f0e1:1';
      const paths = ['/oauth/authorize', '/oauth/logout', '/oauth/authorize', '/oauth/logout'];
      for (const [i, path] of paths.entries()) expect((await postForm(path, `${network}::${i + 1}`)).status, `form ${i + 1}`).to.equal(303);
      const kept = parkedForms();
      const refused = await postForm('/oauth/authorize', `${network}::5`);
      expect(refused.status).to.equal(429);
      expect(refused.headers.get('content-type')).to.match(/^text\/html/);
      expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 3600);
      expect(refused.headers.get('location')).to.equal(null);
      expect(await refused.text()).to.match(/Too many sign-in and sign-out requests came from your network in a short time; try again in \d+ (second|minute|hour)s?\./);
      expect((await postForm('/oauth/logout', `${network}::6`)).status, 'the logout endpoint shares the count').to.equal(429);
      expect(parkedForms(), 'forms kept after the refusals').to.equal(kept);

      expect((await postForm('/oauth/authorize', '2001:db8:f0e1:2::1')).status, 'another /64').to.equal(303);
      expect((await anonymousAuthorization('2001:db8:f0e1:1::7')).status, 'the sign-in pages\' own allowance is untouched').to.equal(303);
    });
  });
});

describe('rate limits on Redis', function () {
  this.timeout(60_000);

  let redis: RedisServer;
  let first: TestServer;
  let second: TestServer;

  before(async () => {
    // Kept on disk, so what the service stored survives the outage below.
    redis = await startRedis(['--appendonly', 'yes', '--appendfsync', 'always']);
    first = await startServer({ store: redis.url, env: { ...LIMITS, KEY_ENCRYPTION_KEY } });
    second = await startServer({ store: redis.url, env: { ...LIMITS, KEY_ENCRYPTION_KEY, BASE_URL: first.issuer } });
  });

  after(async () => {
    await second?.stop();
    await first?.stop();
    await redis?.stop();
  });

  it('two instances share the counts: registrations and an account lock', async () => {
    const address = newAddress();
    expect((await register(first, address)).status).to.equal(201);
    expect((await register(second, address)).status).to.equal(201);
    await expectOAuthTooMany(await register(first, address), 3600, /registrations/);
    expect((await register(second, address)).status).to.equal(429);

    const user = await seedUser(first);
    const app = await registered(first);
    const browser = new Browser();
    const form = await openLogin(browser, first, app);
    await signIn(browser, form, user.email, 'wrong password 1');
    expect((await signIn(browser, form, user.email, 'wrong password 2')).status).to.equal(429);
    const onSecond = { ...form, action: form.action.replace(first.origin, second.origin) };
    const right = await signIn(browser, onSecond, user.email, user.password);
    expect(right.status, 'the right password on the other instance, during the lock').to.equal(429);
  });

  it('a known device: signed in on one instance, it signs in on the other while the account is locked; its failures on both lock it', async () => {
    const user = await seedUser(first);
    const app = await registered(first);
    const own = new Browser();
    expect((await signIn(own, await openLogin(own, first, app), user.email, user.password)).status).to.equal(303);
    const guesser = new Browser();
    const guessing = await openLogin(guesser, second, app);
    await signIn(guesser, guessing, user.email, 'a guess 1');
    expect((await signIn(guesser, guessing, user.email, 'a guess 2')).status, 'locked on the other instance').to.equal(429);

    const onSecond = await openLogin(own, second, app);
    expect((await signIn(own, onSecond, user.email, user.password)).status, 'the known device on the other instance, during the lock').to.equal(303);
    expect((await signIn(own, await openLogin(own, first, app), user.email, 'my typo 1')).status, 'its failure counted here').to.equal(400);
    const locked = await signIn(own, await openLogin(own, second, app), user.email, 'my typo 2');
    expect(locked.status, 'and its second there: it is locked').to.equal(429);
  });

  it('while Redis is down: limiters count in process and never fail, and what needs the store still answers 503', async () => {
    const store = openStore(redis.url, { keyPrefix: 'test:outage:' });
    const limiter = store.rateLimiter({ name: 'outage', points: 2, duration: 60 });
    try {
      await redis.down();
      await limiter.consume('k');
      await limiter.consume('k');
      const third = await limiter.consume('k').then(() => undefined, (refusal: unknown) => refusal);
      expect(third, 'a refusal, not an error').to.be.instanceOf(RateLimiterRes);

      const registration = await register(first, newAddress());
      expect(registration.status).to.equal(503);
      expect(registration.headers.get('retry-after')).to.match(/^\d+$/);
      expect(await registration.json()).to.include({ error: 'temporarily_unavailable' });
    } finally {
      await redis.up();
    }
    // Back on Redis, counts are shared again: what one store counts, another sees.
    const other = openStore(redis.url, { keyPrefix: 'test:outage:' });
    try {
      const deadline = Date.now() + 10_000;
      while (await store.ping().then(() => false, () => true)) {
        if (Date.now() > deadline) throw new Error('the store did not reconnect');
        await sleep(100);
      }
      await other.ping();
      await limiter.consume('after');
      await limiter.consume('after');
      const refused = await other.rateLimiter({ name: 'outage', points: 2, duration: 60 }).consume('after').then(() => undefined, (refusal: unknown) => refusal);
      expect(refused).to.be.instanceOf(RateLimiterRes);
      expect((await register(first, newAddress())).status, 'the service recovered').to.equal(201);
    } finally {
      await other.close();
      await store.close();
    }
  });
});
