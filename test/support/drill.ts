import { expect } from 'chai';

import { codeRequest, exchangeCode, postCredentials, revokeToken, tokenRequest, type RegisteredClient } from './oauth.ts';
import type { SeededUser, TestServer } from './server.ts';
import { UserAgent, authorize } from './user_agent.ts';
import { eventually, sleep } from './wait.ts';

/**
 * What the drills (a crash, a restart, a failover under load) share: load that runs until told to
 * stop, and refresh-token chains as their clients know them, to check after the drill against what
 * the service acknowledged.
 */

export interface TokenSet {
  access_token: string;
  refresh_token: string;
}

/** A refresh-token chain as its client knows it. */
export interface Chain {
  /** The last refresh token the client received. */
  refreshToken: string;
  /** Those it rotated away from: each answered with the next. */
  consumed: string[];
  /** A request of it is sent and not answered yet. */
  inFlight: boolean;
  /**
   * A request of it was refused (503) or never answered: the service may have consumed its refresh
   * token without handing out the next. Presenting it again is then answered 503 until that
   * rotation is abandoned, and then rotates.
   */
  inDoubt: boolean;
  /** When the service last handed it a refresh token (Date.now()). */
  receivedAt: number;
  /**
   * Refused as invalid_grant: the store lost the rotations that made its refresh token, and the
   * service took that token for a reuse (the user signs in again). Only where the load lets the
   * store lose writes it acknowledged (MixedLoadOptions.writesMayBeLost); the chain is then left alone.
   */
  lost: boolean;
}

/** One registered client of the service's instances, as a drill's load drives it. */
export interface DrillClient {
  /** The instance for the next request: the instances take turns, as behind one load balancer. */
  next: () => TestServer;
  /** Rotates a refresh token, at the next instance unless told where. */
  refresh: (refreshToken: string, on?: TestServer) => Promise<Response>;
}

/** `client` at `instances`, taking turns (one instance: always that one). */
export function drillClient(instances: TestServer[], client: RegisteredClient): DrillClient {
  let turn = 0;
  const next = () => instances[(turn += 1) % instances.length]!;
  return {
    next,
    refresh: (refreshToken, on = next()) => tokenRequest(on.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken, ...postCredentials(client) }),
  };
}

/**
 * `count` refresh-token chains of `user`, each begun with its own user agent (its own session, so
 * its own grant) signed in at the first instance, whose URLs are the issuer's, and its code
 * exchanged at the next instance.
 */
export async function openChains(count: number, { instances, client, user, next }: { instances: TestServer[]; client: RegisteredClient; user: SeededUser; next: () => TestServer }): Promise<Chain[]> {
  const chains: Chain[] = [];
  for (let i = 0; i < count; i += 1) {
    const { url, verifier } = codeRequest(instances[0]!.issuer, client.client_id);
    const callback = await authorize(new UserAgent(), url, instances[0]!.origin, { email: user.email, password: user.password });
    const response = await exchangeCode(next().issuer, client, callback.searchParams.get('code')!, verifier);
    expect(response.status).to.equal(200);
    chains.push(newChain(await response.json() as TokenSet));
  }
  return chains;
}

export function newChain(tokens: TokenSet): Chain {
  return { refreshToken: tokens.refresh_token, consumed: [], inFlight: false, inDoubt: false, receivedAt: Date.now(), lost: false };
}

/** Records a rotation the client received. */
export function rotated(chain: Chain, tokens: TokenSet): void {
  chain.consumed.push(chain.refreshToken);
  chain.refreshToken = tokens.refresh_token;
  chain.inDoubt = false;
  chain.receivedAt = Date.now();
}

/** Steady load: `step` again and again, a few milliseconds apart, until `load.stopped`; what `step` throws once stopped (a dead server's) ends it quietly. */
export async function untilStopped(load: { stopped: boolean }, step: () => Promise<void>): Promise<void> {
  while (!load.stopped) {
    try {
      await step();
    } catch (error) {
      if (load.stopped) return;
      throw error;
    }
    await sleep(5 + Math.floor(Math.random() * 25));
  }
}

/** The refusal the service documents for a write it cannot make last: 503, Retry-After in seconds, the JSON error. */
function isDocumentedRefusal(response: Response, body: Record<string, unknown> | undefined): boolean {
  return response.status === 503 && /^\d+$/.test(response.headers.get('retry-after') ?? '') && body?.error === 'temporarily_unavailable';
}

/** What the load was told: each write the service acknowledged, to check after the drill. */
export interface Acknowledged {
  revokedAccessTokens: string[];
  /** Ids of data API records created. */
  records: string[];
  /** When each revocation and record was acknowledged (Date.now()), by token or id. */
  at: Map<string, number>;
}

/**
 * mixedLoad against the service: `client` rotates the chains and revokes access tokens with its
 * credentials, and records are created with the workspace's API key `apiKey`.
 */
export function serviceLoad({ chains, drill, client, apiKey, paused, writesMayBeLost }: { chains: Chain[]; drill: DrillClient; client: RegisteredClient; apiKey: string } & Pick<MixedLoadOptions, 'paused' | 'writesMayBeLost'>) {
  return mixedLoad({
    chains,
    next: drill.next,
    refresh: (token) => drill.refresh(token),
    revoke: (issuer, token) => revokeToken(issuer, client, token),
    createRecord: (issuer, name) => fetch(`${issuer}/rest/companies`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    }),
    paused,
    writesMayBeLost,
  });
}

/** Last, as a replay revokes the grant: no rotated-out refresh token is redeemed again. */
export async function expectNoReplay(chains: Chain[], refresh: DrillClient['refresh']): Promise<void> {
  for (const token of chains.flatMap((chain) => chain.consumed)) {
    const response = await refresh(token);
    expect(response.status).to.equal(400);
    expect(await response.json()).to.include({ error: 'invalid_grant' });
  }
}

export interface MixedLoadOptions {
  /** The chains to rotate, each started with a code exchange. */
  chains: Chain[];
  /** The next instance to send a request to (requests alternate between instances). */
  next: () => { issuer: string };
  /** A refresh of one chain's token, to whichever instance `next` gives. */
  refresh: (refreshToken: string) => Promise<Response>;
  revoke: (issuer: string, accessToken: string) => Promise<Response>;
  /** Creates a data API record (201 with its id) at the issuer. */
  createRecord: (issuer: string, name: string) => Promise<Response>;
  /** While true for a chain, it is left alone (settled before the failure). */
  paused?: (chain: Chain) => boolean;
  /**
   * The store may lose the last writes it acknowledged (a Redis with `appendfsync everysec`
   * killed while its disk is busy): a refresh refused as invalid_grant then marks its chain lost,
   * to be checked against when its refresh token was received, rather than unexpected.
   */
  writesMayBeLost?: boolean;
}

/**
 * Steady mixed load, as the drills run it: every chain rotating its refresh token, access tokens
 * revoked, data records created, until stop(). Everything acknowledged is recorded, every
 * refusal timed, every answer other than a success or the documented refusal kept as
 * `unexpected`: a chain refused (or whose request was cut) is in doubt until it rotates again,
 * and one refused as invalid_grant, its refresh token taken for a reuse, is unexpected.
 */
export function mixedLoad(options: MixedLoadOptions) {
  const { chains, next } = options;
  const unexpected: string[] = [];
  const refusedAt: number[] = [];
  const writtenAt: number[] = [];
  const acknowledged: Acknowledged = { revokedAccessTokens: [], records: [], at: new Map() };
  const accessTokens: string[] = [];
  /** Chains refused or cut mid-rotation at least once. */
  const doubted = new Set<Chain>();
  const load = { stopped: false };

  const refused = async (what: string, response: Response) => {
    const body = await response.json().catch(() => undefined) as Record<string, unknown> | undefined;
    if (!isDocumentedRefusal(response, body)) unexpected.push(`${what}: ${response.status} ${JSON.stringify(body)}`);
    refusedAt.push(Date.now());
  };
  const rotate = (chain: Chain) => untilStopped({ get stopped() { return load.stopped || chain.lost || (options.paused?.(chain) ?? false); } }, async () => {
    chain.inFlight = true;
    const response = await options.refresh(chain.refreshToken).finally(() => {
      chain.inFlight = false;
    });
    if (response.status === 200) {
      const tokens = await response.json() as TokenSet;
      rotated(chain, tokens);
      accessTokens.push(tokens.access_token);
      writtenAt.push(Date.now());
    } else if (options.writesMayBeLost && response.status === 400 && (await response.clone().json() as { error?: string }).error === 'invalid_grant') {
      chain.lost = true;
      chain.inDoubt = false;
    } else {
      chain.inDoubt = true;
      doubted.add(chain);
      await refused('refresh', response);
    }
  });
  const revokeTokens = untilStopped(load, async () => {
    const token = accessTokens.shift();
    if (!token) return;
    const response = await options.revoke(next().issuer, token);
    if (response.status === 200) {
      acknowledged.revokedAccessTokens.push(token);
      acknowledged.at.set(token, Date.now());
      writtenAt.push(Date.now());
      return;
    }
    accessTokens.push(token);
    await refused('revocation', response);
  });
  const createRecords = untilStopped(load, async () => {
    const response = await options.createRecord(next().issuer, `Drill ${acknowledged.records.length}`);
    if (response.status === 201) {
      const { id } = (await response.json() as { data: { company: { id: string } } }).data.company;
      acknowledged.records.push(id);
      acknowledged.at.set(id, Date.now());
      writtenAt.push(Date.now());
      return;
    }
    await refused('record', response);
  });
  const workers = [...chains.map(rotate), revokeTokens, createRecords].map((running) => running.catch((error: unknown) => {
    unexpected.push(`a worker failed: ${String(error)}`);
  }));

  const rotations = () => chains.reduce((sum, chain) => sum + chain.consumed.length, 0);
  const progress = () => `${rotations()} rotations, ${acknowledged.revokedAccessTokens.length} revocations, ${acknowledged.records.length} records, `
    + `${refusedAt.length} refusals; ${unexpected.slice(0, 5).join('; ')}`;
  return {
    unexpected,
    refusedAt,
    writtenAt,
    acknowledged,
    rotations,
    /** How many chains were in doubt at some point (each must rotate again). */
    doubted: () => doubted.size,
    /** Waits until `probe` holds, failing with `what` and the load's progress after `timeoutMs`. */
    until: (what: string, probe: () => boolean | Promise<boolean>, timeoutMs: number) => eventually(what, probe, timeoutMs, 50).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${progress()}`);
    }),
    /** Ends the load once each worker's request in flight is answered. */
    stop: async () => {
      load.stopped = true;
      await Promise.all(workers);
    },
  };
}

/** The answer `status` to `send`, which is sent again while it is refused with 503, for up to `timeoutMs`. */
export async function acknowledged(what: string, send: () => Promise<Response>, status: number, timeoutMs = 15_000): Promise<Response> {
  return eventually(`${what} acknowledged`, async () => {
    const response = await send();
    if (response.status === status) return response;
    expect(response.status, `${what}: ${await response.text()}`).to.equal(503);
    return undefined;
  }, timeoutMs, 100);
}
