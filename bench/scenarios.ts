import { REDIRECT_URI } from '../test/helpers/oauth.ts';
import type { ConnectionScript, LoadPlan } from './load.ts';
import type { Credentials, Target } from './target.ts';

/**
 * What each scenario sends, against either server. `plan` runs right before its round, so what it
 * mints (codes, refresh tokens, access tokens) is fresh: codes live only 60 s.
 */

export const SCENARIO_NAMES = ['client_credentials', 'authorization_code', 'refresh_token', 'introspection', 'userinfo', 'rss'] as const;
export type ScenarioName = typeof SCENARIO_NAMES[number];

export interface RoundContext {
  connections: number;
  /** The round's length in seconds; a scenario run by count mints about this long's worth of codes. */
  duration: number;
  /** Tokens the rss scenario issues per server. */
  rssTokens: number;
}

export interface Scenario {
  readonly name: ScenarioName;
  /** One line for the report: what one request is. */
  readonly summary: string;
  /** Measured once per server instead of once per round (it accumulates state on purpose). */
  readonly once?: boolean;
  /** For a scenario run by count: the most seconds a run may take before it is stopped. */
  readonly countLimitSeconds?: number;
  plan(target: Target, context: RoundContext): Promise<LoadPlan>;
}

/** What a successful response of each kind must contain. */
const ISSUED = '"access_token"';
const ACTIVE = '"active":true';
const PROFILE = '"sub"';

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const form = (values: Record<string, string>) => new URLSearchParams(values).toString();
const clientAuth = (client: Credentials) => ({ client_id: client.client_id, client_secret: client.client_secret });

/** Codes are redeemed by autocannon in the order minted; a longer minting window would risk the last ones' 60 s lifetime. */
const MAX_MINTING_SECONDS = 20;
/** Parallel minting requests: enough to keep the server busy without making the harness the bottleneck. */
const MINTING_CONCURRENCY = 8;

function clientCredentialsPlan(target: Target): LoadPlan {
  return {
    method: 'POST',
    path: '/oauth/token',
    headers: FORM,
    body: form({ grant_type: 'client_credentials', scope: 'api', ...clientAuth(target.workspaceClient) }),
    expect: ISSUED,
  };
}

async function issueClientCredentials(target: Target, resource: string | undefined): Promise<string> {
  const response = await fetch(`${target.issuer}/oauth/token`, {
    method: 'POST',
    headers: FORM,
    body: form({ grant_type: 'client_credentials', scope: 'api', ...(resource ? { resource } : {}), ...clientAuth(target.workspaceClient) }),
  });
  if (response.status !== 200) throw new Error(`${target.side}: client_credentials failed ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { access_token: string }).access_token;
}

export const SCENARIOS: Record<ScenarioName, Scenario> = {
  client_credentials: {
    name: 'client_credentials',
    summary: 'POST /oauth/token grant_type=client_credentials scope=api (ES256 JWT)',
    plan: async (target) => clientCredentialsPlan(target),
  },

  authorization_code: {
    name: 'authorization_code',
    summary: 'POST /oauth/token grant_type=authorization_code with PKCE; codes minted just before, run by count',
    // Codes are dead 60 s after minting: waiting longer could not help.
    countLimitSeconds: 60,
    plan: async (target, { connections, duration }) => {
      const codes = await target.codes.mintFor(Math.min(duration, MAX_MINTING_SECONDS), MINTING_CONCURRENCY, connections);
      let next = 0;
      const client = clientAuth(target.codeClient);
      // One shared supply: whichever connection is free redeems the next code, each exactly once.
      const script: ConnectionScript = {
        nextBody: () => {
          const minted = codes[next++];
          // Never reached (autocannon sends exactly `amount`); a spent supply shows up as a 400, not a crash.
          if (!minted) return form({ grant_type: 'authorization_code', code: 'supply-exhausted', ...client });
          return form({ grant_type: 'authorization_code', code: minted.code, redirect_uri: REDIRECT_URI, code_verifier: minted.verifier, ...client });
        },
      };
      return { method: 'POST', path: '/oauth/token', headers: FORM, amount: codes.length, perConnection: () => script, expect: ISSUED };
    },
  },

  refresh_token: {
    name: 'refresh_token',
    summary: 'POST /oauth/token grant_type=refresh_token, one rotation chain per connection',
    plan: async (target, { connections }) => {
      const starts: string[] = [];
      for (let i = 0; i < connections; i += 1) {
        const { refresh_token: token } = await target.codes.tokens();
        if (!token) throw new Error(`${target.side}: the code exchange gave no refresh token`);
        starts.push(token);
      }
      const client = clientAuth(target.codeClient);
      return {
        method: 'POST',
        path: '/oauth/token',
        headers: FORM,
        expect: ISSUED,
        perConnection: () => {
          // Each connection rotates its own token: sending one twice would be refresh-token reuse,
          // which revokes the grant (and so every chain).
          let token = starts.pop()!;
          return {
            nextBody: () => form({ grant_type: 'refresh_token', refresh_token: token, ...client }),
            onResponse: (status, body) => {
              if (status === 200) token = (JSON.parse(body) as { refresh_token: string }).refresh_token;
            },
          };
        },
      };
    },
  },

  introspection: {
    name: 'introspection',
    summary: 'POST /oauth/introspect of the client\'s own access token (service: JWT; baseline: opaque)',
    plan: async (target) => {
      const token = await issueClientCredentials(target, target.introspectableResource);
      return { method: 'POST', path: '/oauth/introspect', headers: FORM, body: form({ token, ...clientAuth(target.workspaceClient) }), expect: ACTIVE };
    },
  },

  userinfo: {
    name: 'userinfo',
    summary: 'GET /oauth/userinfo with a user\'s bearer token (service: JWT "api profile"; baseline: opaque "openid profile")',
    plan: async (target) => {
      const { access_token: token } = await target.codes.tokens(target.userinfoScope);
      return { method: 'GET', path: '/oauth/userinfo', headers: { authorization: `Bearer ${token}` }, expect: PROFILE };
    },
  },

  rss: {
    name: 'rss',
    summary: 'client_credentials tokens issued in bulk, then the server\'s VmRSS',
    once: true,
    countLimitSeconds: 300,
    plan: async (target, { rssTokens }) => ({ ...clientCredentialsPlan(target), amount: rssTokens }),
  },
};
