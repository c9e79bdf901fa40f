import { generateKeyPair, exportJWK, type JSONWebKeySet, type JWK } from 'jose';

import { ExchangeLog, type Exchange } from './http/exchange_log.ts';
import { HttpClient } from './http/http_client.ts';
import type { Credentials } from './http/interactive_sign_in.ts';
import { UserAgent } from './http/user_agent.ts';
import type { Failure } from './module.ts';
import type { ResponseMode } from './plans.ts';

/** What the whole run shares: the deployment under test and who signs in. */
export interface Target {
  /** The issuer, as given with --base-url; discovery is at {issuer}/.well-known/openid-configuration. */
  issuer: string;
  credentials: Credentials;
  /** Sent as a Bearer token to the registration endpoint (REGISTRATION=initial_access_token). */
  initialAccessToken?: string;
  /** The public half of the RS256 key the suite puts in every registration request (`jwks`). */
  clientJwks: JSONWebKeySet;
  /** A shell command that rotates the OP's signing keys (the operator's step in oidcc-server-rotate-keys). */
  rotateKeysCommand?: string;
}

/** Thrown to end a module early with a result other than a failure. */
export class ModuleEnded extends Error {
  override name = 'ModuleEnded';
  readonly status: 'not supported' | 'operator action' | 'not run';
  readonly reason: string;

  constructor(status: ModuleEnded['status'], reason: string) {
    super(reason);
    this.status = status;
    this.reason = reason;
  }
}

/** Thrown when a check the suite makes with callAndStopOnFailure fails: nothing after it can run. */
export class ModuleStopped extends Error {
  override name = 'ModuleStopped';
}

/**
 * One module's run: its HTTP log, its failures and warnings. `check` is the suite's
 * callAndContinueOnFailure (a failure is recorded and the module goes on), `require` its
 * callAndStopOnFailure, `warn` a check the suite grades as a warning.
 */
export class ModuleContext {
  readonly log = new ExchangeLog();
  readonly http = new HttpClient(this.log);
  readonly failures: Failure[] = [];
  readonly warnings: string[] = [];
  /** What the runner looked at where the suite asks a human (the page it read instead of a screenshot). */
  readonly notes: string[] = [];
  readonly #cleanups: Array<() => Promise<void>> = [];
  readonly target: Target;
  /** The plan's response_mode variant: every authorization request of the module asks for it. */
  readonly responseMode: ResponseMode;

  constructor(target: Target, responseMode: ResponseMode = 'default') {
    this.target = target;
    this.responseMode = responseMode;
  }

  /** Runs after the module, whatever its outcome (the suite's cleanup: unregistering clients). */
  onCleanup(cleanup: () => Promise<void>): void {
    this.#cleanups.push(cleanup);
  }

  async cleanUp(): Promise<void> {
    for (const cleanup of this.#cleanups.splice(0).reverse()) await cleanup();
  }

  newUserAgent(): UserAgent {
    return new UserAgent(this.http);
  }

  check(ok: boolean, message: string, exchange: Exchange | undefined = this.log.last()): boolean {
    if (!ok) this.failures.push({ message, exchange });
    return ok;
  }

  require(ok: boolean, message: string, exchange: Exchange | undefined = this.log.last()): asserts ok {
    if (!this.check(ok, message, exchange)) throw new ModuleStopped(message);
  }

  fail(message: string, exchange: Exchange | undefined = this.log.last()): never {
    this.failures.push({ message, exchange });
    throw new ModuleStopped(message);
  }

  warn(ok: boolean, message: string): boolean {
    if (!ok) this.warnings.push(message);
    return ok;
  }

  note(text: string): void {
    this.notes.push(text);
  }

  /** The suite's fireTestSkipped: an outcome it accepts (e.g. an optional feature not offered). */
  notSupported(why: string): never {
    throw new ModuleEnded('not supported', why);
  }

  operatorAction(what: string): never {
    throw new ModuleEnded('operator action', what);
  }

  /** A path this runner cannot exercise black-box (it would need keys or documents the OP fetches). */
  notRun(why: string): never {
    throw new ModuleEnded('not run', why);
  }
}

/** The suite's GenerateRS256ClientJWKs: a fresh key each run, only the public half ever sent. */
export async function clientPublicJwks(): Promise<JSONWebKeySet> {
  const { publicKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk: JWK = { ...(await exportJWK(publicKey)), use: 'sig', alg: 'RS256', kid: crypto.randomUUID() };
  return { keys: [jwk] };
}
