import { performance } from 'node:perf_hooks';

import autocannon from 'autocannon';
import type { Client, Options, Request, Result } from 'autocannon';

import { cpuSeconds, mainThreadCpuSeconds, ownCpuSeconds, residentBytes } from '../report/proc.ts';

/** One round of load against one server: what to send, and for how long or how many times. */
export interface LoadPlan {
  readonly method: 'GET' | 'POST';
  readonly path: string;
  readonly headers: Record<string, string>;
  /** The same body on every request (autocannon encodes the request once). */
  readonly body?: string;
  /**
   * Or a body (or headers) per request: called once per connection, so a connection can carry state
   * from one response to its next request (a refresh-token chain) or draw from a shared supply
   * (codes, distinct access tokens).
   */
  readonly perConnection?: () => ConnectionScript;
  /** Stop after exactly this many requests instead of after the round's duration (single-use codes). */
  readonly amount?: number;
  /**
   * Text every successful response must contain (`"active":true`, say): a 200 that says the wrong
   * thing is a harness mistake the status code alone would hide.
   */
  readonly expect: string;
}

export interface ConnectionScript {
  nextBody?(): string;
  /** Headers for the next request, over the plan's. */
  nextHeaders?(): Record<string, string>;
  onResponse?(status: number, body: string): void;
}

export interface LoadSettings {
  connections: number;
  /** Seconds, for plans without an `amount`. */
  duration: number;
  /** A run by `amount` is stopped after this many seconds, whatever is left (the time bound of the whole bench). */
  limitSeconds: number;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  requestsPerSecond: number;
  latencyP50: number;
  latencyP99: number;
  /** Non-2xx responses, socket errors and timeouts, and 2xx responses without the expected text. */
  errors: number;
  /** 2xx responses without the plan's expected text. */
  wrongBodies: number;
  /** Response counts by status code, to tell which errors they were. */
  statusCodes: Record<string, number>;
  socketErrors: number;
  /** Whether an `amount` run hit `limitSeconds` before finishing. */
  cutShort: boolean;
  /** CPU used during the run, in cores (1.0 = one core busy all the time). */
  serverCores: number | undefined;
  /** The server's main (JavaScript) thread alone: near 1.0 means its event loop was the limit. */
  serverMainThreadCores: number | undefined;
  /** The same for this process, i.e. autocannon: near 1.0 means the load generator itself was the limit. */
  benchCores: number;
  /** The server's VmRSS right after the run. */
  serverRssBytes: number | undefined;
}

/** Runs autocannon against `origin` and measures the server process `pid` alongside. */
export async function runLoad(origin: string, pid: number, plan: LoadPlan, settings: LoadSettings): Promise<LoadResult> {
  const connections = plan.amount === undefined ? settings.connections : Math.min(settings.connections, plan.amount);
  const request: Request = { method: plan.method, path: plan.path, headers: plan.headers, body: plan.body };
  const options: Options = {
    url: origin,
    connections,
    pipelining: 1,
    timeout: 30,
    requests: [request],
    // Error bodies never contain the expected text either, so every non-2xx is also a mismatch (subtracted below).
    verifyBody: (body) => typeof body === 'string' && body.includes(plan.expect),
    ...(plan.amount === undefined ? { duration: settings.duration } : { amount: plan.amount }),
    ...(plan.perConnection ? { setupClient: scripted(request, plan.perConnection) } : {}),
  };

  const serverBefore = await cpuSeconds(pid);
  const mainBefore = await mainThreadCpuSeconds(pid);
  const benchBefore = ownCpuSeconds();
  const started = performance.now();
  const result = await new Promise<{ result: Result; cutShort: boolean }>((resolve, reject) => {
    let cutShort = false;
    const instance = autocannon(options, (error: unknown, finished: Result) => {
      clearTimeout(limit);
      if (error) reject(error instanceof Error ? error : new Error(String(error)));
      else resolve({ result: finished, cutShort });
    });
    const limit = setTimeout(() => {
      cutShort = true;
      instance.stop();
    }, settings.limitSeconds * 1000);
  });
  const wall = (performance.now() - started) / 1000;
  const serverAfter = await cpuSeconds(pid);
  const mainAfter = await mainThreadCpuSeconds(pid);
  const benchCores = (ownCpuSeconds() - benchBefore) / wall;

  const { result: r } = result;
  const statusCodes: Record<string, number> = {};
  for (const [code, stats] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = stats.count ?? 0;
  const seconds = r.duration || wall;
  const wrongBodies = Math.max(0, r.mismatches - r.non2xx);
  return {
    requests: r.requests.total,
    seconds,
    requestsPerSecond: r.requests.total / seconds,
    latencyP50: r.latency.p50,
    latencyP99: r.latency.p99,
    errors: r.non2xx + r.errors + wrongBodies,
    wrongBodies,
    statusCodes,
    socketErrors: r.errors,
    cutShort: result.cutShort,
    serverCores: perSecond(serverBefore, serverAfter, wall),
    serverMainThreadCores: perSecond(mainBefore, mainAfter, wall),
    benchCores,
    serverRssBytes: await residentBytes(pid),
  };
}

function perSecond(before: number | undefined, after: number | undefined, seconds: number): number | undefined {
  return before === undefined || after === undefined ? undefined : (after - before) / seconds;
}

/**
 * autocannon's per-request `context` is reset every time a connection wraps around its request
 * list (every request, with a list of one), so per-connection state lives in closures instead:
 * `setupClient` runs once per connection and gives that connection its own request list.
 */
function scripted(template: Request, perConnection: () => ConnectionScript) {
  return (client: Client) => {
    const script = perConnection();
    client.setRequests([{
      ...template,
      setupRequest: (request: Request) => ({
        ...request,
        ...(script.nextBody ? { body: script.nextBody() } : {}),
        ...(script.nextHeaders ? { headers: { ...template.headers, ...script.nextHeaders() } } : {}),
      }),
      onResponse: (status: number, body: string) => script.onResponse?.(status, body),
    }]);
  };
}
