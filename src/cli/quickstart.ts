import { text } from 'node:stream/consumers';

import type { Provider } from 'oidc-provider';

import type { Store } from '../../adapters/store.ts';
import { AccountError, type Accounts } from '../accounts/accounts.ts';
import { storeOperatorClient } from '../clients/operator_clients.ts';
import { WORKSPACE_METADATA } from '../clients/registration.ts';
import { ask, askHidden } from './prompt.ts';
import { buildGuide, describeGuide } from './quickstart_guide.ts';

/**
 * `npm run admin -- quickstart`: a newcomer's first run. Creates a workspace, its first admin and
 * a demo client bound to it, then prints how to use them: an authorization URL ready to open and
 * the curl commands for the code exchange, a refresh, client credentials and a data API call.
 * On a terminal it asks for what the flags do not give; otherwise the flags must give it.
 */

export interface QuickstartOptions {
  'workspace-name'?: string;
  email?: string;
  name?: string;
  'password-stdin'?: boolean;
  'base-url'?: string;
  force?: boolean;
}

export interface QuickstartContext {
  store: Store;
  accounts: Accounts;
  options: QuickstartOptions;
  /** The issuer, BASE_URL. */
  issuer: string;
  /** The engine, configured as the service configures it (the admin CLI's). */
  engine: () => Promise<{ provider: Provider }>;
  /** The admin CLI's error for a command called wrongly (printed with the usage). */
  usage: (message: string) => Error;
}

/**
 * Where the demo client's browser is sent. Nothing needs to listen there: the code is read from
 * the address bar. Registered as a web client's (application_type web), so it must match exactly
 * and consent is remembered, as for an application in development on loopback.
 */
export const DEMO_REDIRECT_URI = 'http://127.0.0.1:8976/callback';
const DEMO_CLIENT_NAME = 'Quickstart demo';
const DEFAULT_WORKSPACE_NAME = 'My workspace';

interface Answers {
  workspaceName: string;
  email: string;
  name: string;
  password: string;
}

export async function quickstart(ctx: QuickstartContext): Promise<{ text: string; json: unknown }> {
  const { accounts, options } = ctx;
  const baseUrl = parseBaseUrl(options['base-url'], ctx);
  const users = await accounts.countUsers();
  if (users > 0 && !options.force) {
    throw new AccountError(
      `quickstart is for a service with no users yet, and this one has ${users}. Add people with "user create" and clients with `
      + '"iat create", or run quickstart --force to add another workspace, admin and demo client.',
    );
  }
  const answers = await gather(options, ctx.usage);
  if (!answers.workspaceName.trim()) throw new AccountError('a workspace needs a name');

  // The user first: it checks the email and password, so a refusal leaves no empty workspace behind.
  const user = await accounts.createUser({ email: answers.email, name: answers.name, password: answers.password });
  const workspace = await accounts.createWorkspace(answers.workspaceName);
  await accounts.addMember(user.id, workspace.id, 'admin');
  const client = await createDemoClient((await ctx.engine()).provider, workspace.id);

  const guideClient = { clientId: client.client_id, clientSecret: client.client_secret, redirectUri: DEMO_REDIRECT_URI };
  const guide = buildGuide(baseUrl, guideClient);
  const summary = [
    `Created workspace ${workspace.id} ("${workspace.name}"), its admin ${user.id} (${user.email}),`,
    `and the demo client "${DEMO_CLIENT_NAME}", bound to the workspace (its secret is shown once; only a hash is kept):`,
    '',
    `   client_id      ${client.client_id}`,
    `   client_secret  ${client.client_secret}`,
    `   redirect_uri   ${DEMO_REDIRECT_URI}`,
    '',
  ].join('\n');
  return {
    text: `${summary}\n${describeGuide(guide, { ...guideClient, email: user.email })}`,
    json: {
      base_url: baseUrl,
      workspace: { id: workspace.id, name: workspace.name },
      user: { id: user.id, email: user.email, name: user.name, role: 'admin' },
      client,
      ...guide,
    },
  };
}

/** The URL printed for the service: BASE_URL unless --base-url says where it is reached. */
function parseBaseUrl(given: string | undefined, ctx: QuickstartContext): string {
  if (given === undefined) return ctx.issuer;
  const url = URL.parse(given);
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search || url.hash || given.includes('?') || given.includes('#')) {
    throw ctx.usage(`--base-url must be the service's absolute http(s) URL, e.g. https://auth.example.com, got "${given}"`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/** From the flags, asking on a terminal for what they leave out; with --password-stdin, stdin is the password. */
async function gather(options: QuickstartOptions, usage: (message: string) => Error): Promise<Answers> {
  const interactive = process.stdin.isTTY === true && !options['password-stdin'];
  if (!interactive) {
    if (!options.email) throw usage('--email is required (or run quickstart in a terminal to be asked)');
    if (!options.name) throw usage('--name is required (or run quickstart in a terminal to be asked)');
    if (!options['password-stdin']) throw usage('give the password on standard input with --password-stdin (never as an argument)');
    return {
      workspaceName: options['workspace-name'] ?? DEFAULT_WORKSPACE_NAME,
      email: options.email,
      name: options.name,
      password: (await text(process.stdin)).replace(/\r?\n$/, ''),
    };
  }
  process.stderr.write('Creating the first workspace, its admin and a demo client.\n');
  const workspaceName = options['workspace-name'] ?? await ask('Workspace name', DEFAULT_WORKSPACE_NAME);
  const email = options.email ?? await ask('Your email address');
  const name = options.name ?? await ask('Your name');
  const password = await askHidden('Password (at least 8 characters, not shown)');
  if (await askHidden('Password again') !== password) throw new AccountError('the two passwords differ; nothing was created');
  return { workspaceName, email, name, password };
}

export interface DemoClient {
  client_id: string;
  /** Shown once: only its hash is stored. */
  client_secret: string;
  client_name: string;
  grant_types: string[];
  redirect_uris: string[];
  token_endpoint_auth_method: 'client_secret_post';
  [WORKSPACE_METADATA]: string;
}

/**
 * A confidential client bound to the workspace, as one registered with the workspace's initial
 * access token would be (so it may use client credentials, and an operator stands behind it), but
 * written directly: the quickstart needs no running service. Stored like a resource server
 * (storeOperatorClient), as a registered client is (secret hashed, listed under its workspace).
 */
async function createDemoClient(provider: Provider, workspaceId: string): Promise<DemoClient> {
  const fields = {
    client_name: DEMO_CLIENT_NAME,
    grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
    redirect_uris: [DEMO_REDIRECT_URI],
    token_endpoint_auth_method: 'client_secret_post' as const,
    [WORKSPACE_METADATA]: workspaceId,
  };
  const { client_id, client_secret } = await storeOperatorClient(provider, { ...fields, application_type: 'web', response_types: ['code'] });
  return { client_id, client_secret, ...fields };
}
