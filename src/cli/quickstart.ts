import { text } from 'node:stream/consumers';

import type { Provider } from 'oidc-provider';

import { storeLocation, type StoreLocation } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';
import type { Config } from '../../config/index.ts';
import { isEmailAddress, type Accounts } from '../accounts/accounts.ts';
import { nameProblem } from '../accounts/names.ts';
import { MIN_PASSWORD_LENGTH, passwordProblem } from '../accounts/passwords.ts';
import { ENGINE_ROUTES } from '../engine/routes.ts';
import type { KeyMaterial } from '../keys/keys.ts';
import { ask, askHidden } from './prompt.ts';
import { QuickstartError } from './quickstart_error.ts';
import { buildGuide, describeGuide, describeTokens } from './quickstart_guide.ts';
import { listenForCallback, type CallbackListener } from './quickstart_listener.ts';
import { createRecords, DEMO_CLIENT_NAME, type Created, type NewAdmin } from './quickstart_records.ts';
import { probeService } from './quickstart_service.ts';

/**
 * `npm run admin -- quickstart`: a newcomer's first run. Creates a workspace, its first admin and
 * a demo client bound to it, then prints how to use them: an authorization URL ready to open and
 * the curl commands for the code exchange, a refresh, client credentials and a data API call; with
 * --listen it also answers on the demo client's redirect URI and makes the exchange itself.
 *
 * It reads the service's own configuration (STORE, BASE_URL or PORT, the key-encryption key) and
 * says which store it writes to. Everything that can fail is checked before the first write: the
 * store answers and has no users yet, the engine builds as at the service's start (the
 * key-encryption key loads), the service at the printed URL runs on this store, the listener's
 * port is free, the answers are acceptable (each checked as it is typed); the writes themselves
 * are all or nothing (quickstart_records.ts).
 */

export interface QuickstartOptions {
  'workspace-name'?: string;
  email?: string;
  name?: string;
  'password-stdin'?: boolean;
  'base-url'?: string;
  force?: boolean;
  listen?: boolean;
  'listen-port'?: string;
  json?: boolean;
}

export interface QuickstartContext {
  /** The service's configuration, read by the same loadConfig from the same environment variables. */
  config: Config;
  store: Store;
  accounts: Accounts;
  options: QuickstartOptions;
  /** The engine, built as the service builds it at start: throws what would stop the service (a missing key-encryption key). */
  engine: () => Promise<{ provider: Provider; keys: KeyMaterial }>;
  /** The admin CLI's error for a command called wrongly (printed with the usage). */
  usage: (message: string) => Error;
  /** Output the person needs before the command ends (--listen: the URL to open), on stdout. */
  print: (text: string) => void;
  /** Progress and notes, on stderr. */
  note: (text: string) => void;
}

/** Where the demo client's browser is sent: a port of the person's machine, on loopback. */
export const DEMO_REDIRECT_PORT = 8976;
const DEFAULT_WORKSPACE_NAME = 'My workspace';

interface Plan {
  baseUrl: string;
  store: StoreLocation;
  interactive: boolean;
  /** With --listen: the port to answer on (0: any free one). */
  listenPort: number | undefined;
}

export async function quickstart(ctx: QuickstartContext): Promise<{ text: string; json: unknown }> {
  const plan = readOptions(ctx);
  // Given all at once, the answers are checked at once; on a terminal, once the checks below pass, as they are typed.
  const given = plan.interactive ? undefined : await adminFromFlags(ctx.options);
  ctx.note(`Creating a workspace, its admin and a demo client in ${plan.store.description}, for the service at ${plan.baseUrl}.`);
  await checkStore(ctx, plan.store);
  if (given) refuse(await emailTaken(ctx.accounts, given.email));
  const engine = await buildEngine(ctx);
  await checkService(ctx, plan, engine.keys);
  const listener = plan.listenPort === undefined ? undefined : await listen(plan.listenPort);
  try {
    const redirectUri = listener?.redirectUri ?? `http://127.0.0.1:${DEMO_REDIRECT_PORT}/callback`;
    const admin = given ?? await askAdmin(ctx);
    const created = await createRecords({ accounts: ctx.accounts, provider: engine.provider, clients: ctx.store.model('Client') }, admin, redirectUri);
    const output = describeCreated(plan, created, redirectUri, listener !== undefined);
    if (!listener) return output;
    ctx.print(output.text);
    return await awaitBrowser(ctx, plan, created, listener, output.guide.authorization);
  } finally {
    await listener?.close();
  }
}

/** The flags, checked before anything else: a mistake in how the command was called is a usage error. */
function readOptions({ options, config, usage }: QuickstartContext): Plan {
  const interactive = process.stdin.isTTY === true && !options['password-stdin'];
  if (!interactive) {
    if (!options.email) throw usage('--email is required (or run quickstart in a terminal to be asked)');
    if (!options.name) throw usage('--name is required (or run quickstart in a terminal to be asked)');
    if (!options['password-stdin']) throw usage('give the password on standard input with --password-stdin (never as an argument)');
  }
  const listening = options.listen === true || options['listen-port'] !== undefined;
  if (listening && options.json) throw usage('--listen waits for a browser and prints what happens as it happens: it has no --json output');
  return {
    baseUrl: parseBaseUrl(options['base-url'], config.issuer, usage),
    store: storeLocation(config.store),
    interactive,
    listenPort: listening ? parsePort(options['listen-port'], usage) : undefined,
  };
}

/** The URL printed for the service: BASE_URL unless --base-url says where it is reached. */
function parseBaseUrl(given: string | undefined, issuer: string, usage: QuickstartContext['usage']): string {
  if (given === undefined) return issuer;
  const url = URL.parse(given);
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash || given.includes('?') || given.includes('#')) {
    throw usage(`--base-url must be the service's absolute http(s) URL, e.g. https://auth.example.com, got "${given}"`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

function parsePort(given: string | undefined, usage: QuickstartContext['usage']): number {
  if (given === undefined) return DEMO_REDIRECT_PORT;
  if (!/^\d{1,5}$/.test(given) || Number(given) > 65535) throw usage(`--listen-port must be a port number from 1 to 65535 (0: any free port), got "${given}"`);
  return Number(given);
}

/** The store answers, and is the empty store the quickstart is for (unless --force). */
async function checkStore({ accounts, options }: QuickstartContext, store: StoreLocation): Promise<void> {
  let users: number;
  try {
    users = await accounts.countUsers();
  } catch (error) {
    throw new QuickstartError(`${store.description} does not answer (${(error as Error).message}); nothing was written`);
  }
  if (users > 0 && !options.force) {
    throw new QuickstartError(
      `quickstart is for a service with no users yet, and ${store.description} has ${users}. Add people with "user create" and clients with `
      + '"iat create", or run quickstart --force to add another workspace, admin and demo client.',
    );
  }
}

/** What the service's start does with these settings, so that a setting it would refuse stops the quickstart before it writes. */
async function buildEngine(ctx: QuickstartContext): Promise<{ provider: Provider; keys: KeyMaterial }> {
  try {
    return await ctx.engine();
  } catch (error) {
    throw new QuickstartError(`the service would not start with these settings: ${(error as Error).message}; nothing was written`);
  }
}

/**
 * The service at the printed URL must be the one over this store: what the quickstart writes is
 * otherwise unknown to it (settings not shared with the terminal the service runs in). With
 * --listen it must also be running: the listener exchanges the code there.
 */
async function checkService(ctx: QuickstartContext, plan: Plan, keys: KeyMaterial): Promise<void> {
  const service = await probeService(plan.baseUrl, keys.jwks.keys);
  const sameSettings = 'run quickstart with the settings the service was started with (it prints the command when it starts with no users)';
  if (service.answers === 'another store') {
    throw new QuickstartError(`the service at ${plan.baseUrl} runs on another store than ${plan.store.description} (it publishes none of the signing keys kept there): ${sameSettings}; nothing was written`);
  }
  if (service.answers === 'this store') return;
  if (plan.listenPort !== undefined) {
    throw new QuickstartError(`${service.why}, and --listen exchanges the code there: start the service first (npm start), or if it runs elsewhere, ${sameSettings}; nothing was written`);
  }
  ctx.note(`${capitalized(service.why)}. Start the service before opening the URL below; if it already runs with other settings (PORT, BASE_URL, STORE), stop here and ${sameSettings}.`);
}

async function listen(port: number): Promise<CallbackListener> {
  try {
    return await listenForCallback(port);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'EADDRINUSE' ? 'is in use' : `cannot be listened on (${code ?? (error as Error).message})`;
    throw new QuickstartError(`127.0.0.1:${port}, where the demo client's browser comes back, ${why}: choose another port with --listen-port PORT (the demo client is registered with it); nothing was written`);
  }
}

/** On a terminal: each answer is checked as it is typed, and asked again with the reason when it will not do. */
async function askAdmin({ options, accounts }: QuickstartContext): Promise<NewAdmin> {
  const workspaceName = options['workspace-name'] ?? await askUntil(() => ask('Workspace name', DEFAULT_WORKSPACE_NAME), workspaceNameProblem);
  const emailUnusable = async (answer: string) => emailProblem(answer) ?? await emailTaken(accounts, answer);
  const email = options.email ?? await askUntil(() => ask('Your email address'), emailUnusable);
  const name = options.name ?? await askUntil(() => ask('Your name'), userNameProblem);
  refuse(workspaceNameProblem(workspaceName) ?? await emailUnusable(email) ?? userNameProblem(name));
  for (;;) {
    const password = await askUntil(() => askHidden(`Password (at least ${MIN_PASSWORD_LENGTH} characters, not shown)`), passwordProblem);
    if (await askHidden('Password again') === password) return { workspaceName, email, name, password };
    process.stderr.write('The two passwords differ; type it again.\n');
  }
}

/** Without a terminal: the flags and the password on stdin, refused at once when one will not do (a taken email once the store is known to answer). */
async function adminFromFlags(options: QuickstartOptions): Promise<NewAdmin> {
  const admin = {
    workspaceName: options['workspace-name'] ?? DEFAULT_WORKSPACE_NAME,
    email: options.email ?? '',
    name: options.name ?? '',
    password: (await text(process.stdin)).replace(/\r?\n$/, ''),
  };
  refuse(workspaceNameProblem(admin.workspaceName) ?? emailProblem(admin.email) ?? userNameProblem(admin.name) ?? passwordProblem(admin.password));
  return admin;
}

async function askUntil(question: () => Promise<string>, problem: (answer: string) => string | undefined | Promise<string | undefined>): Promise<string> {
  for (;;) {
    const answer = await question();
    const found = await problem(answer);
    if (found === undefined) return answer;
    process.stderr.write(`${capitalized(found)}; try again.\n`);
  }
}

function refuse(problem: string | undefined): void {
  if (problem !== undefined) throw new QuickstartError(`${problem}; nothing was written`);
}

const workspaceNameProblem = (name: string) => nameProblem('a workspace', name);
const userNameProblem = (name: string) => nameProblem('a user', name);

function emailProblem(email: string): string | undefined {
  return isEmailAddress(email) ? undefined : `"${email}" is not an email address`;
}

async function emailTaken(accounts: Accounts, email: string): Promise<string | undefined> {
  return await accounts.findUserByEmail(email) ? `a user with email ${email.trim()} already exists` : undefined;
}

const capitalized = (text: string) => `${text.charAt(0).toUpperCase()}${text.slice(1)}`;

function describeCreated(plan: Plan, { workspace, user, client }: Created, redirectUri: string, listening: boolean) {
  const guideClient = { clientId: client.client_id, clientSecret: client.client_secret, redirectUri };
  const guide = buildGuide(plan.baseUrl, guideClient);
  const summary = [
    `Created in ${plan.store.description}: workspace ${workspace.id} ("${workspace.name}"), its admin ${user.id} (${user.email}),`,
    `and the demo client "${DEMO_CLIENT_NAME}", bound to the workspace (its secret is shown once; only a hash is kept):`,
    '',
    `   client_id      ${client.client_id}`,
    `   client_secret  ${client.client_secret}`,
    `   redirect_uri   ${redirectUri}`,
    '',
  ].join('\n');
  return {
    guide,
    text: `${summary}\n${describeGuide(guide, { ...guideClient, email: user.email }, { listening })}`,
    json: {
      base_url: plan.baseUrl,
      store: plan.store.url,
      workspace: { id: workspace.id, name: workspace.name },
      user: { id: user.id, email: user.email, name: user.name, role: 'admin' },
      client,
      ...guide,
    },
  };
}

/** --listen: the browser comes back to the listener, which exchanges the code; the tokens are the command's result. */
async function awaitBrowser(ctx: QuickstartContext, plan: Plan, { client }: Created, listener: CallbackListener, authorization: { state: string; code_verifier: string }) {
  const tokenEndpoint = `${plan.baseUrl}${ENGINE_ROUTES.token}`;
  ctx.note(`\nListening at ${listener.redirectUri} for the browser to come back (Ctrl-C to stop).`);
  const tokens = await listener.exchange({
    tokenEndpoint,
    clientId: client.client_id,
    clientSecret: client.client_secret,
    codeVerifier: authorization.code_verifier,
    state: authorization.state,
  }, ctx.note);
  return { text: describeTokens(tokens, tokenEndpoint), json: tokens };
}
