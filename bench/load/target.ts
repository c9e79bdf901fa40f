import type { CodeMinter } from './codes.ts';
import type { ServerProcess } from '../processes.ts';
import type { Credentials } from './credentials.ts';

/** What the scenarios need from a server under test, the same shape for the service and the baseline. */

/**
 * `service`: the service with its defaults; `service_off`: the same with RATE_LIMITS=off and
 * METRICS=off, to show what counting costs; `service_durable`: the same on its store's durable
 * variant (SQLITE_SYNCHRONOUS=full, or REDIS_WAIT_REPLICAS=1 with a replica), to show what
 * surviving a power loss or a failover costs; `service_rev`: the service as another commit has it
 * (--against), to judge a change in the same run; `baseline`: the bare engine.
 */
export type Side = 'service' | 'service_off' | 'service_durable' | 'service_rev' | 'baseline';
export const SIDES: readonly Side[] = ['service', 'service_off', 'service_durable', 'service_rev', 'baseline'];

/** The sides that run the service's own code (the data API scenarios measure only these). */
export function isService(side: Side): boolean {
  return side !== 'baseline';
}

export interface Target {
  readonly side: Side;
  readonly issuer: string;
  readonly process: ServerProcess;
  /** A client_credentials client (on the service: bound to the seeded workspace). */
  readonly workspaceClient: Credentials;
  /** An authorization_code + refresh_token client, redirect http://127.0.0.1:9/callback. */
  readonly codeClient: Credentials;
  /** Mints codes for `codeClient` as the seeded user. */
  readonly codes: CodeMinter;
  /**
   * The `resource` of a client_credentials token this server can introspect: the service
   * introspects its JWTs; the bare engine only opaque tokens, so the baseline names its opaque resource.
   */
  readonly introspectableResource: string | undefined;
  /** The scope of a user token the server's userinfo accepts ('openid profile' for the bare engine: audience-less). */
  readonly userinfoScope: string;
  /**
   * An API key of the seeded workspace, for the data API (`/rest`), created on the first call;
   * undefined for the bare engine, which has no data API.
   */
  readonly dataApiKey: (() => Promise<string>) | undefined;
}
