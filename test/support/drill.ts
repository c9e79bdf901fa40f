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
   * A request of it was refused (503) or never answered: the service may have used its refresh
   * token up without handing out the next. Presenting it again then counts as a reuse.
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
