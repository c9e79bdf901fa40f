import type { Provider } from 'oidc-provider';

import { storeLocation, type StoreLocation } from '../../adapters/index.ts';
import type { Store } from '../../adapters/store.ts';
import type { Config } from '../../config/index.ts';
import type { Accounts } from '../accounts/accounts.ts';
import { emailProblem, nameProblem } from '../accounts/names.ts';
import { MIN_PASSWORD_LENGTH } from '../accounts/passwords.ts';
import { ENGINE_ROUTES } from '../engine/routes.ts';
import type { KeyMaterial } from '../keys/keys.ts';
import { stdinPassword } from './command.ts';
import { ask, askHidden } from './prompt.ts';
import { QuickstartError } from './quickstart_error.ts';
import { authorizationRequest, buildGuide, describeGuide, describeTokens, type Guide } from './quickstart_guide.ts';
import { listenForCallback, type CallbackListener } from './quickstart_listener.ts';
import { createRecords, DEMO_CLIENT_NAME, type Created, type DemoClient, type NewAdmin } from './quickstart_records.ts';
import { probeService } from './quickstart_service.ts';

/**
 * `npm run admin -- quickstart`: a newcomer's first run. Creates a workspace, its first admin and
 * a demo client bound to it, then prints how to use them: an authorization URL ready to open and
 * the curl commands for the code exchange, a refresh, client credentials and a data API call; with
 * --listen it also answers on the demo client's redirect URI and makes the exchange itself.
 *
 * The demo client is what curl can be: a secret, bearer tokens. With PAR_REQUIRED=on the guide
 * starts with the push (and --listen pushes); with DPOP_REQUIRED=on or FAPI=on the service would
 * refuse such a client or its tokens, so none is made: the workspace and its admin are, and the
 * output says why there is no demo client and what to register instead.
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
  /** PAR_REQUIRED=on: the demo client pushes its authorization requests. */
  pushed: boolean;
  /** Set when the service's settings leave no room for the demo client: none is made. */
  clientSkipped: ClientSkipped | undefined;
}

/** Why no demo client is made: the settings (by their environment variable) and, in words, why and what to do instead. */
interface ClientSkipped {
  settings: string[];
  reason: (workspaceId: string) => string;
}

export async function quickstart(ctx: QuickstartContext): Promise<{ text: string; json: unknown }> {
  const plan = readOptions(ctx);
  // Given all at once, the answers are checked at once; on a terminal, once the checks below pass, as they are typed.
  const given = plan.interactive ? undefined : await adminFromFlags(ctx);
  const what = plan.clientSkipped ? `a workspace and its admin (no demo client: ${settingsOn(plan.clientSkipped.settings)})` : 'a workspace, its admin and a demo client';
  ctx.note(`Creating ${what} in ${plan.store.description}, for the service at ${plan.baseUrl}.`);
  await checkStore(ctx, plan.store);
  if (given) refuse(await emailTaken(ctx.accounts, given.email));
  const engine = await buildEngine(ctx);
  await checkService(ctx, plan, engine.keys);
  const listener = plan.listenPort === undefined ? undefined : await listen(plan.listenPort);
  try {
    const redirectUri = listener?.redirectUri ?? `http://127.0.0.1:${DEMO_REDIRECT_PORT}/callback`;
    const admin = given ?? await askAdmin(ctx);
    const writers = { accounts: ctx.accounts, provider: engine.provider, clients: ctx.store.model('Client') };
    if (plan.clientSkipped) return describeWithoutClient(plan, await createRecords(writers, admin, undefined), plan.clientSkipped);
    const created = await createRecords(writers, admin, redirectUri);
    const output = describeCreated(plan, created, redirectUri, listener);
    if (!listener) return output;
    ctx.print(output.text);
    return await awaitBrowser(ctx, plan, created.client, listener, output.guide);
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
  const clientSkipped = demoClientRefused(config);
  if (listening && clientSkipped) {
    throw usage(`--listen exchanges a code as the demo client, and with ${settingsOn(clientSkipped.settings)} the service would refuse a client with a secret and `
      + 'bearer tokens, so none is made: run quickstart without --listen to create the workspace and its admin; it says what to register instead');
  }
  return {
    baseUrl: parseBaseUrl(options['base-url'], config.issuer, usage),
    store: storeLocation(config.store),
    interactive,
    listenPort: listening ? parsePort(options['listen-port'], usage) : undefined,
    pushed: config.parRequired,
    clientSkipped,
  };
}

/**
 * Whether the service's settings leave room for the demo client, a secret and bearer tokens used
 * with curl: FAPI=on refuses the client itself (private_key_jwt only) and its unpushed requests;
 * DPOP_REQUIRED=on refuses its token requests for the data API and its bearer tokens there (a
 * DPoP proof is signed with a key of the client's, for each request). PAR_REQUIRED=on alone is
 * no obstacle: the guide pushes.
 */
function demoClientRefused(config: Config): ClientSkipped | undefined {
  const settings = [...(config.fapi ? ['FAPI'] : []), ...(config.dpopRequired ? ['DPOP_REQUIRED'] : [])];
  if (settings.length === 0) return undefined;
  const why = config.fapi
    ? 'With FAPI=on every client that obtains tokens is held to the FAPI 2.0 Security Profile: it authenticates with private_key_jwt, '
      + 'pushes its authorization requests (PAR) and sends a DPoP proof with every token request. The service would refuse a demo client '
      + 'with a secret, bearer tokens and curl commands, so none was made.'
    : 'With DPOP_REQUIRED=on the data API and /mcp take DPoP-bound tokens only: each token request and each call carries a DPoP proof '
      + 'signed with a key the client keeps, which the curl commands of a demo client (a secret, bearer tokens) cannot make, so none was made.';
  const instead = config.fapi
    ? 'register with it (POST /oauth/register) a client that authenticates with private_key_jwt (its public keys in "jwks"), and use a '
      + 'library that pushes its requests and sends DPoP proofs (oauth4webapi, openid-client): docs/api-guide.md, "FAPI 2.0 clients", '
      + '"Client authentication" and "DPoP (sender-constrained tokens)"'
    : 'register a client with it (POST /oauth/register; with private_key_jwt no secret crosses the wire), and get its tokens with a library '
      + 'that sends DPoP proofs (oauth4webapi\'s DPoP, openid-client\'s getDPoPHandle): docs/api-guide.md, "Client authentication" and '
      + '"DPoP (sender-constrained tokens)"';
  return {
    settings,
    reason: (workspaceId) => `${why} Instead, make an initial access token for the workspace (npm run admin -- iat create --workspace ${workspaceId}), `
      + `${instead}. Meanwhile an API key calls the data API: npm run admin -- api-key create --workspace ${workspaceId} --name NAME.`,
  };
}

const settingsOn = (settings: readonly string[]) => settings.map((name) => `${name}=on`).join(' and ');

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
  const before = plan.clientSkipped ? 'before you use what is made here' : 'before opening the URL below';
  ctx.note(`${capitalized(service.why)}. Start the service ${before}; if it already runs with other settings (PORT, BASE_URL, STORE), stop here and ${sameSettings}.`);
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
    const password = await askUntil(
      () => askHidden(`Password (at least ${MIN_PASSWORD_LENGTH} characters, not shown)`),
      // Said to the person who typed the email and name, in a clause "; try again" ends.
      (answer) => accounts.newPasswordProblem(answer, { email, name }, { workspaceNames: [workspaceName], creatingWorkspace: true, told: 'user', form: 'clause' }),
    );
    if (await askHidden('Password again') === password) return { workspaceName, email, name, password };
    process.stderr.write('The two passwords differ; type it again.\n');
  }
}

/** Without a terminal: the flags and the password on stdin, refused at once when one will not do (a taken email once the store is known to answer). */
async function adminFromFlags({ options, accounts }: QuickstartContext): Promise<NewAdmin> {
  const admin = {
    workspaceName: options['workspace-name'] ?? DEFAULT_WORKSPACE_NAME,
    email: options.email ?? '',
    name: options.name ?? '',
    password: await stdinPassword(),
  };
  refuse(workspaceNameProblem(admin.workspaceName) ?? emailProblem(admin.email) ?? userNameProblem(admin.name) ?? accounts.newPasswordProblem(admin.password, admin, { workspaceNames: [admin.workspaceName] }));
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

async function emailTaken(accounts: Accounts, email: string): Promise<string | undefined> {
  return await accounts.findUserByEmail(email) ? `a user with email ${email.trim()} already exists` : undefined;
}

const capitalized = (text: string) => `${text.charAt(0).toUpperCase()}${text.slice(1)}`;

function describeCreated(plan: Plan, { workspace, user, client }: Required<Created>, redirectUri: string, listener: CallbackListener | undefined) {
  const guideClient = { clientId: client.client_id, clientSecret: client.client_secret, redirectUri };
  const guide = buildGuide(plan.baseUrl, guideClient, { pushed: plan.pushed });
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
    text: `${summary}\n${describeGuide(guide, { ...guideClient, email: user.email }, { listening: listener !== undefined, startUrl: plan.pushed ? listener?.startUrl : undefined })}`,
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

/**
 * Without a demo client: what was created, and in one paragraph why there is no client and what to
 * do instead. JSON keeps its shape: `client`, `authorization` and `commands` null, and `client_skipped`.
 */
function describeWithoutClient(plan: Plan, { workspace, user }: Created, skipped: ClientSkipped) {
  const reason = skipped.reason(workspace.id);
  return {
    text: [
      `Created in ${plan.store.description}: workspace ${workspace.id} ("${workspace.name}") and its admin ${user.id} (${user.email}).`,
      '',
      `No demo client. ${reason}`,
    ].join('\n'),
    json: {
      base_url: plan.baseUrl,
      store: plan.store.url,
      workspace: { id: workspace.id, name: workspace.name },
      user: { id: user.id, email: user.email, name: user.name, role: 'admin' },
      client: null,
      client_skipped: { settings: skipped.settings, reason },
      authorization: null,
      commands: null,
    },
  };
}

/** --listen: the browser comes back to the listener, which exchanges the code (pushing the request first when the service takes only pushed ones); the tokens are the command's result. */
async function awaitBrowser(ctx: QuickstartContext, plan: Plan, client: DemoClient, listener: CallbackListener, { authorization }: Guide) {
  const tokenEndpoint = `${plan.baseUrl}${ENGINE_ROUTES.token}`;
  const guideClient = { clientId: client.client_id, clientSecret: client.client_secret, redirectUri: listener.redirectUri };
  const push = plan.pushed
    ? {
      endpoint: `${plan.baseUrl}${ENGINE_ROUTES.pushed_authorization_request}`,
      authorizationEndpoint: `${plan.baseUrl}${ENGINE_ROUTES.authorization}`,
      parameters: authorizationRequest(guideClient, authorization),
    }
    : undefined;
  ctx.note(`\nListening at ${listener.redirectUri} for the browser to come back (Ctrl-C to stop).`);
  const tokens = await listener.exchange({
    tokenEndpoint,
    clientId: client.client_id,
    clientSecret: client.client_secret,
    codeVerifier: authorization.code_verifier,
    state: authorization.state,
    ...(push ? { push } : {}),
  }, ctx.note);
  return { text: describeTokens(tokens, tokenEndpoint), json: tokens };
}
