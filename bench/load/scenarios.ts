import { REDIRECT_URI } from '../../test/support/oauth.ts';
import type { ConnectionScript, LoadPlan } from './load.ts';
import type { Target } from './target.ts';
import type { Credentials } from './credentials.ts';
import { ProofMaker } from './dpop_proofs.ts';

/**
 * What each scenario sends, against either server. `plan` runs right before its round, so what it
 * mints (codes, refresh tokens, access tokens) is fresh: codes live only 60 s.
 */

export const SCENARIO_NAMES = [
  'client_credentials', 'authorization_code', 'refresh_token', 'introspection', 'userinfo',
  'data_api_token', 'data_api_dpop', 'data_api_token_uncached', 'data_api_key', 'rss',
] as const;
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
  /** Run against the service alone: the bare engine has nothing to compare (the data API). */
  readonly serviceOnly?: boolean;
  /** For the report: whether the credential's check is cached, i.e. which case the numbers are. */
  readonly caching?: string;
  plan(target: Target, context: RoundContext): Promise<LoadPlan>;
}

/** What a successful response of each kind must contain. */
const ISSUED = '"access_token"';
const ACTIVE = '"active":true';
const PROFILE = '"sub"';
/** A list with records in it, not just any 200. */
const COMPANIES_LISTED = '"companies":[{';

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

async function issueClientCredentials(target: Target, resource: string | undefined, proofs?: ProofMaker): Promise<string> {
  const tokenUrl = `${target.issuer}/oauth/token`;
  const response = await fetch(tokenUrl, {
    method: 'POST',
    headers: { ...FORM, ...(proofs ? { dpop: proofs.proof('POST', tokenUrl) } : {}) },
    body: form({ grant_type: 'client_credentials', scope: 'api', ...(resource ? { resource } : {}), ...clientAuth(target.workspaceClient) }),
  });
  if (response.status !== 200) throw new Error(`${target.side}: client_credentials failed ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { access_token: string }).access_token;
}

/** The data API request every data_api scenario sends: a page of the workspace's companies. */
const DATA_API_PAGE = 10;
const DATA_API_PATH = `/rest/companies?limit=${DATA_API_PAGE}`;
/** Companies seeded in the bench workspace, so a page is full. */
const SEEDED_COMPANIES = 10;
/**
 * The service keeps this many verified access tokens in process (VERIFIED_TOKENS_KEPT in
 * src/tokens/verifier.ts), evicting the oldest first; used round-robin, a pool larger than
 * that misses the cache on every request.
 */
const SERVICE_VERIFIED_TOKENS_KEPT = 10_000;
const DISTINCT_TOKENS = 12_000;
/** A minted pool is reused while its tokens have well over half their hour (3600 s) left. */
const POOL_REUSE_MS = 20 * 60 * 1000;

/** The service's data API: seeded once per target (companies, through the API itself), then read. */
const seeded = new WeakMap<Target, Promise<void>>();
const tokenPools = new WeakMap<Target, { mintedAt: number; tokens: Promise<string[]> }>();

function requireDataApi(target: Target): () => Promise<string> {
  if (!target.dataApiKey) throw new Error(`${target.side} has no data API: this scenario runs against the service only`);
  return target.dataApiKey;
}

function seedCompanies(target: Target): Promise<void> {
  let done = seeded.get(target);
  if (!done) {
    done = (async () => {
      const token = await issueClientCredentials(target, undefined);
      for (let i = 1; i <= SEEDED_COMPANIES; i += 1) {
        const response = await fetch(`${target.issuer}/rest/companies`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `Bench company ${i}` }),
        });
        if (response.status !== 201) throw new Error(`${target.side}: POST /rest/companies answered ${response.status}: ${await response.text()}`);
      }
    })();
    seeded.set(target, done);
  }
  return done;
}

/** DISTINCT_TOKENS client_credentials tokens, minted in parallel; kept for later rounds while young. */
function distinctTokens(target: Target): Promise<string[]> {
  const pool = tokenPools.get(target);
  if (pool && Date.now() - pool.mintedAt < POOL_REUSE_MS) return pool.tokens;
  const tokens: string[] = [];
  const worker = async () => {
    while (tokens.length < DISTINCT_TOKENS) tokens.push(await issueClientCredentials(target, undefined));
  };
  const minted = Promise.all(Array.from({ length: MINTING_CONCURRENCY }, worker)).then(() => tokens);
  tokenPools.set(target, { mintedAt: Date.now(), tokens: minted });
  return minted;
}

function dataApiRead(authorization: string): LoadPlan {
  return { method: 'GET', path: DATA_API_PATH, headers: { authorization }, expect: COMPANIES_LISTED };
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

  data_api_token: {
    name: 'data_api_token',
    summary: `GET ${DATA_API_PATH} with a client_credentials access token (scope api, workspace-bound client); `
      + `${SEEDED_COMPANIES} companies seeded`,
    serviceOnly: true,
    caching: 'one token for every request of a round: the service keeps verified tokens in process by their SHA-256 (src/tokens/verifier.ts, '
      + `${SERVICE_VERIFIED_TOKENS_KEPT.toLocaleString('en-US')} tokens), so only a round's first request checks the ES256 signature`,
    plan: async (target) => {
      requireDataApi(target);
      await seedCompanies(target);
      return dataApiRead(`Bearer ${await issueClientCredentials(target, undefined)}`);
    },
  },

  data_api_dpop: {
    name: 'data_api_dpop',
    summary: `GET ${DATA_API_PATH} with a DPoP-bound client_credentials access token and a new DPoP proof each request (ES256, made by the load generator); `
      + `${SEEDED_COMPANIES} companies seeded`,
    serviceOnly: true,
    caching: 'one token, cached as in data_api_token; each request\'s proof is new: one ES256 signature check and one store insert (its jti, '
      + 'kept for replay detection on every instance) per request, beside data_api_token\'s work',
    plan: async (target) => {
      requireDataApi(target);
      await seedCompanies(target);
      const proofs = new ProofMaker();
      const token = await issueClientCredentials(target, undefined, proofs);
      const url = `${target.issuer}/rest/companies`;
      const script: ConnectionScript = { nextHeaders: () => ({ dpop: proofs.proof('GET', url, token) }) };
      return { ...dataApiRead(`DPoP ${token}`), perConnection: () => script };
    },
  },

  data_api_token_uncached: {
    name: 'data_api_token_uncached',
    summary: `GET ${DATA_API_PATH} with a different client_credentials access token each request `
      + `(${DISTINCT_TOKENS.toLocaleString('en-US')} minted before the first round, used in turn)`,
    serviceOnly: true,
    caching: `${DISTINCT_TOKENS.toLocaleString('en-US')} tokens in turn, more than the ${SERVICE_VERIFIED_TOKENS_KEPT.toLocaleString('en-US')} `
      + 'the service keeps verified (oldest evicted first): every request checks an ES256 signature '
      + '(with WORKERS above 1, each worker keeps its own cache and sees only part of each pass, so some requests hit)',
    plan: async (target) => {
      requireDataApi(target);
      await seedCompanies(target);
      const tokens = await distinctTokens(target);
      let next = 0;
      // One shared turn across connections: round-robin over the whole pool.
      const script: ConnectionScript = { nextHeaders: () => ({ authorization: `Bearer ${tokens[next++ % tokens.length]!}` }) };
      return { ...dataApiRead(`Bearer ${tokens[0]!}`), perConnection: () => script };
    },
  },

  data_api_key: {
    name: 'data_api_key',
    summary: `GET ${DATA_API_PATH} with an API key of the workspace (admin api-key create); ${SEEDED_COMPANIES} companies seeded`,
    serviceOnly: true,
    caching: 'one API key: the service keeps a verified key in process (src/api_keys/api_keys.ts) and re-reads it from the store '
      + 'every 2 s; no signature, a SHA-256 digest of the key per request',
    plan: async (target) => {
      const apiKey = await requireDataApi(target)();
      await seedCompanies(target);
      return dataApiRead(`Bearer ${apiKey}`);
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
