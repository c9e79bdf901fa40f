import { sleep } from './wait.ts';

/**
 * What the drills (a crash, a failover under load) share: load that runs until told to stop, and
 * refresh-token chains as their clients know them, to check after the drill against what the
 * service acknowledged.
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
}

export function newChain(tokens: TokenSet): Chain {
  return { refreshToken: tokens.refresh_token, consumed: [], inFlight: false, inDoubt: false };
}

/** Records a rotation the client received. */
export function rotated(chain: Chain, tokens: TokenSet): void {
  chain.consumed.push(chain.refreshToken);
  chain.refreshToken = tokens.refresh_token;
  chain.inDoubt = false;
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
  const acknowledged: Acknowledged = { revokedAccessTokens: [], records: [] };
  const accessTokens: string[] = [];
  /** Chains refused or cut mid-rotation at least once. */
  const doubted = new Set<Chain>();
  const load = { stopped: false };

  const refused = async (what: string, response: Response) => {
    const body = await response.json().catch(() => undefined) as Record<string, unknown> | undefined;
    if (!isDocumentedRefusal(response, body)) unexpected.push(`${what}: ${response.status} ${JSON.stringify(body)}`);
    refusedAt.push(Date.now());
  };
  const rotate = (chain: Chain) => untilStopped({ get stopped() { return load.stopped || (options.paused?.(chain) ?? false); } }, async () => {
    chain.inFlight = true;
    const response = await options.refresh(chain.refreshToken).finally(() => {
      chain.inFlight = false;
    });
    if (response.status === 200) {
      const tokens = await response.json() as TokenSet;
      rotated(chain, tokens);
      accessTokens.push(tokens.access_token);
      writtenAt.push(Date.now());
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
      writtenAt.push(Date.now());
      return;
    }
    accessTokens.push(token);
    await refused('revocation', response);
  });
  const createRecords = untilStopped(load, async () => {
    const response = await options.createRecord(next().issuer, `Drill ${acknowledged.records.length}`);
    if (response.status === 201) {
      acknowledged.records.push((await response.json() as { data: { company: { id: string } } }).data.company.id);
      writtenAt.push(Date.now());
      return;
    }
    await refused('record', response);
  });
  const workers = [...chains.map(rotate), revokeTokens, createRecords].map((running) => running.catch((error: unknown) => {
    unexpected.push(`a worker failed: ${String(error)}`);
  }));

  const rotations = () => chains.reduce((sum, chain) => sum + chain.consumed.length, 0);
  return {
    unexpected,
    refusedAt,
    writtenAt,
    acknowledged,
    rotations,
    /** How many chains were in doubt at some point (each must rotate again). */
    doubted: () => doubted.size,
    progress: () => `${rotations()} rotations, ${acknowledged.revokedAccessTokens.length} revocations, ${acknowledged.records.length} records, `
      + `${refusedAt.length} refusals; ${unexpected.slice(0, 5).join('; ')}`,
    /** Ends the load once each worker's request in flight is answered. */
    stop: async () => {
      load.stopped = true;
      await Promise.all(workers);
    },
  };
}
