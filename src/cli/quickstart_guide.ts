import { createHash, randomBytes } from 'node:crypto';

import { ENGINE_ROUTES } from '../engine/routes.ts';
import type { Tokens } from './quickstart_listener.ts';

/**
 * What `admin quickstart` prints for its demo client: an authorization URL ready to open (PKCE
 * S256, a fresh state) and the curl commands for every step after it. Everything is filled in
 * except what only an earlier step's answer can give: the code, the refresh token, the access
 * token, written as shell variables ($CODE, $REFRESH_TOKEN, $ACCESS_TOKEN). With PAR_REQUIRED=on
 * the service takes only pushed authorization requests: the guide starts with the push (curl, to
 * /oauth/par), and the URL to open is the authorization endpoint with the client_id and the
 * request_uri that push answers, which is all a browser may carry then.
 */

export interface GuideClient {
  clientId: string;
  clientSecret: string;
  redirectUri: string;
}

export interface Guide {
  authorization: {
    /** Ready to open; pushed: ends with `request_uri=`, for the request_uri the push answers to be appended. */
    url: string;
    state: string;
    code_verifier: string;
    code_challenge: string;
    code_challenge_method: 'S256';
    scope: string;
  };
  commands: {
    /** Pushed only: the authorization request, sent to /oauth/par before the browser goes anywhere. */
    par?: string;
    exchange: string;
    refresh: string;
    client_credentials: string;
    data_api: string;
  };
}

/** The product's scopes: the data API and the user's profile. */
const SCOPE = 'api profile';

/** `pushed`: the service takes only pushed authorization requests (PAR_REQUIRED=on). */
export function buildGuide(baseUrl: string, client: GuideClient, { pushed }: { pushed: boolean }): Guide {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  const authorization = {
    state: randomBytes(16).toString('base64url'),
    code_verifier: verifier,
    code_challenge: challenge,
    code_challenge_method: 'S256' as const,
    scope: SCOPE,
  };
  const request = authorizationRequest(client, authorization);
  const url = new URL(`${baseUrl}${ENGINE_ROUTES.authorization}`);
  url.search = new URLSearchParams(pushed ? { client_id: client.clientId, request_uri: '' } : { client_id: client.clientId, ...request }).toString();

  const token = `curl -s -X POST ${quote(`${baseUrl}${ENGINE_ROUTES.token}`)}`;
  const credentials = `${field('client_id', client.clientId)} ${field('client_secret', client.clientSecret)}`;
  const par = `curl -s -X POST ${quote(`${baseUrl}${ENGINE_ROUTES.pushed_authorization_request}`)} ${credentials} ${Object.entries(request).map(([name, value]) => field(name, value)).join(' ')}`;
  return {
    authorization: { url: url.href, ...authorization },
    commands: {
      ...(pushed ? { par } : {}),
      exchange: `${token} ${field('grant_type', 'authorization_code')} -d "code=$CODE" ${field('redirect_uri', client.redirectUri)} ${credentials} ${field('code_verifier', verifier)}`,
      refresh: `${token} ${field('grant_type', 'refresh_token')} -d "refresh_token=$REFRESH_TOKEN" ${credentials}`,
      client_credentials: `${token} ${field('grant_type', 'client_credentials')} ${field('scope', 'api')} ${credentials}`,
      data_api: `curl -s ${quote(`${baseUrl}/rest/companies`)} -H "Authorization: Bearer $ACCESS_TOKEN"`,
    },
  };
}

/** The authorization request's parameters besides client_id: in the URL, or pushed (the guide's curl, quickstart --listen's push). */
export function authorizationRequest(client: GuideClient, authorization: Pick<Guide['authorization'], 'state' | 'code_challenge' | 'code_challenge_method' | 'scope'>): Record<string, string> {
  return {
    response_type: 'code',
    redirect_uri: client.redirectUri,
    scope: authorization.scope,
    state: authorization.state,
    code_challenge: authorization.code_challenge,
    code_challenge_method: authorization.code_challenge_method,
  };
}

/**
 * The guide as a newcomer reads it, step by step. `listening`: quickstart --listen answers at the
 * redirect URI and makes step 2 itself; `startUrl`: where it pushes the request when opened
 * (PAR_REQUIRED=on), so that each opening gets a request_uri of its own, fresh.
 */
export function describeGuide(guide: Guide, client: GuideClient & { email: string }, { listening, startUrl }: { listening: boolean; startUrl?: string }): string {
  const { authorization, commands } = guide;
  const comingBack = listening
    ? [
      `   The browser is then sent to ${client.redirectUri}?code=...&state=..., where this quickstart`,
      '   listens: it checks the state, shows the code, and exchanges it as step 2 does.',
      `   ${commands.par ? 'The push and steps' : 'Steps'} 2 to 5 are what to run yourself next time.`,
    ]
    : [
      `   The browser is then sent to ${client.redirectUri}?code=...&state=...; nothing listens there, so`,
      '   the page does not load: take the code from the address bar (and check that state is',
      `   ${authorization.state}). A code works once, within 60 seconds.`,
    ];
  return [
    ...openingStep(guide, client.email, startUrl),
    ...comingBack,
    `   PKCE: the ${commands.par ? 'pushed request' : 'URL'} carries code_challenge ${authorization.code_challenge}; step 2 sends its`,
    `   code_verifier ${authorization.code_verifier}.`,
    '',
    '2. Exchange the code for an access token and a refresh token:',
    '',
    "   CODE='the code from the address bar'",
    `   ${commands.exchange}`,
    '',
    '3. Refresh, with the refresh_token of the last answer (each refresh answers a new one):',
    '',
    "   REFRESH_TOKEN='the refresh_token from the answer'",
    `   ${commands.refresh}`,
    '',
    '4. Client credentials: a token for the workspace itself, no user involved:',
    '',
    `   ${commands.client_credentials}`,
    '',
    '5. Call the data API with the access_token of any of these answers:',
    '',
    "   ACCESS_TOKEN='the access_token from the answer'",
    `   ${commands.data_api}`,
  ].join('\n');
}

/** Step 1: the URL to open; pushed, the push too (made by quickstart --listen at startUrl, or with curl). */
function openingStep({ authorization, commands }: Guide, email: string, startUrl: string | undefined): string[] {
  const start = '1. Start the service if it is not running (npm start, with the same settings as this command).';
  const signIn = `sign in as ${email} and press Allow:`;
  const pushOnly = 'The service takes only pushed authorization requests (PAR_REQUIRED=on)';
  if (commands.par === undefined) return [`${start} Open`, `   this URL in a browser, ${signIn}`, '', `   ${authorization.url}`, ''];
  if (startUrl !== undefined) {
    return [
      `${start} Open`,
      `   this URL in a browser, ${signIn}`,
      '',
      `   ${startUrl}`,
      '',
      `   ${pushOnly}: opened, this quickstart pushes`,
      '   the request as the command below does, then sends the browser on to',
      `   ${authorization.url}... with the request_uri of the answer (which works once, within 60 seconds):`,
      '',
      `   ${commands.par}`,
      '',
    ];
  }
  return [
    start,
    `   ${pushOnly}: push this one first,`,
    '   with the demo client\'s credentials:',
    '',
    `   ${commands.par}`,
    '',
    '   The answer\'s request_uri works once, within 60 seconds: open this URL followed by it in a',
    `   browser, ${signIn}`,
    '',
    `   ${authorization.url}`,
    '',
  ];
}

/** The token endpoint's answer to quickstart --listen's exchange, ready to paste into steps 3 and 5. */
export function describeTokens(tokens: Tokens, tokenEndpoint: string): string {
  const rows: Array<[string, string | number | undefined]> = [
    ['access_token', tokens.access_token],
    ['token_type', tokens.token_type],
    ['expires_in', tokens.expires_in],
    ['scope', tokens.scope],
    ['refresh_token', tokens.refresh_token],
    ['id_token', tokens.id_token],
  ];
  const shown = rows.filter((row): row is [string, string | number] => row[1] !== undefined);
  return [
    `The code was exchanged at ${tokenEndpoint} (step 2):`,
    '',
    ...shown.map(([name, value]) => `   ${name.padEnd(14)} ${value}`),
    '',
    'For steps 3 and 5:',
    '',
    `   ACCESS_TOKEN=${quote(tokens.access_token)}`,
    ...(tokens.refresh_token ? [`   REFRESH_TOKEN=${quote(tokens.refresh_token)}`] : []),
  ].join('\n');
}

/** `-d name=value`, quoted for a POSIX shell when the value needs it. */
function field(name: string, value: string): string {
  return `-d ${quote(`${name}=${value}`)}`;
}

const SHELL_SAFE = /^[A-Za-z0-9_.:/=@%+,-]+$/;

/** One word for a POSIX shell: as it is when nothing in it is special, single-quoted otherwise. */
export function quote(value: string): string {
  return SHELL_SAFE.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}
