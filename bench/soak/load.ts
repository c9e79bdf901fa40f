import { api } from '../../test/support/data_api.ts';
import type { TokenSet } from '../../test/support/drill.ts';
import { codeRequest, exchangeCode, postCredentials, revokeToken, tokenRequest, type RegisteredClient } from '../../test/support/oauth.ts';
import type { SeededUser, TestServer } from '../../test/support/server.ts';
import { UserAgent, authorize } from '../../test/support/user_agent.ts';

/**
 * The soak's steady mixed load at a fixed rate: one operation every 1/rate s, in turn a refresh
 * rotation (on a fixed set of chains), a code exchange (by a fixed set of signed-in user agents,
 * so the number of sessions and grants stays flat), a revocation of an access token a rotation
 * handed out, and a data API record created, read and deleted; requests alternate between the
 * instances. An operation whose turn comes while the last of its kind is still running is
 * skipped (counted), so a slow service is not buried under a growing queue.
 */

export interface Outcome {
  /** Which operation, for the error count. */
  kind: string;
  ms: number;
  ok: boolean;
}

export interface LoadContext {
  instances: TestServer[];
  client: RegisteredClient;
  user: SeededUser;
  apiKey: string;
}

const CHAINS = 8;
const AGENTS = 4;

export async function startSoakLoad(context: LoadContext, rate: number, record: (outcome: Outcome) => void): Promise<{ stop(): Promise<void>; skipped(): number }> {
  const { instances, client, user, apiKey } = context;
  let turn = 0;
  const next = () => instances[(turn += 1) % instances.length]!;
  const origin = instances[0]!.origin;
  const issuer = instances[0]!.issuer;
  const signIn = { email: user.email, password: user.password };

  const agents = Array.from({ length: AGENTS }, () => new UserAgent());
  const mint = async (agent: UserAgent) => {
    const { url, verifier } = codeRequest(issuer, client.client_id);
    const callback = await authorize(agent, url, origin, signIn);
    return { code: callback.searchParams.get('code')!, verifier };
  };
  const exchange = async (agent: UserAgent): Promise<TokenSet> => {
    const { code, verifier } = await mint(agent);
    const response = await exchangeCode(next().issuer, client, code, verifier);
    if (response.status !== 200) throw new Error(`code exchange: ${response.status}`);
    return response.json() as Promise<TokenSet>;
  };
  // Each chain on a session of its own, so rotating one never touches another's grant.
  const chains: string[] = [];
  for (let i = 0; i < CHAINS; i += 1) chains.push((await exchange(new UserAgent())).refresh_token);
  const accessTokens: string[] = [];

  let chainTurn = 0;
  let agentTurn = 0;
  const operations: Record<string, () => Promise<boolean>> = {
    refresh: async () => {
      const index = (chainTurn += 1) % chains.length;
      const response = await tokenRequest(next().issuer, { grant_type: 'refresh_token', refresh_token: chains[index]!, ...postCredentials(client) });
      if (response.status !== 200) return false;
      const tokens = await response.json() as TokenSet;
      chains[index] = tokens.refresh_token;
      accessTokens.push(tokens.access_token);
      return true;
    },
    code: async () => {
      const tokens = await exchange(agents[(agentTurn += 1) % agents.length]!);
      accessTokens.push(tokens.access_token);
      return true;
    },
    revoke: async () => {
      const token = accessTokens.shift();
      if (!token) return true;
      const response = await revokeToken(next().issuer, client, token);
      await response.body?.cancel();
      // Keep the backlog bounded: only the newest few wait for their turn.
      accessTokens.splice(0, Math.max(0, accessTokens.length - 100));
      return response.status === 200;
    },
    record: async () => {
      const on = next();
      const created = await api<{ data: { company: { id: string } } }>(on, '/rest/companies', { credential: apiKey, json: { name: 'Soak' } });
      if (created.status !== 201) return false;
      const path = `/rest/companies/${created.body.data.company.id}`;
      const read = await api(next(), path, { credential: apiKey });
      const deleted = await api(next(), path, { method: 'DELETE', credential: apiKey });
      return read.status === 200 && deleted.status < 300;
    },
  };
  const kinds = Object.keys(operations);
  const running = new Set<string>();
  const inFlight = new Set<Promise<void>>();
  let skipped = 0;
  let tick = 0;

  const timer = setInterval(() => {
    const kind = kinds[(tick += 1) % kinds.length]!;
    if (running.has(kind)) {
      skipped += 1;
      return;
    }
    running.add(kind);
    const started = performance.now();
    const done = operations[kind]!().catch(() => false).then((ok) => {
      record({ kind, ms: performance.now() - started, ok });
      running.delete(kind);
      inFlight.delete(done);
    });
    inFlight.add(done);
  }, 1000 / rate);

  return {
    skipped: () => skipped,
    stop: async () => {
      clearInterval(timer);
      await Promise.all(inFlight);
    },
  };
}
