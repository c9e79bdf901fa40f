import type { ModuleContext } from './context.ts';
import type { Exchange } from './http/exchange_log.ts';

/**
 * One test module of the OpenID Foundation conformance suite, re-created: `name` is the suite's
 * own test name (its @PublishTestModule testName), so a row of this runner's report is the row of
 * the suite's plan it stands for.
 */
export interface ConformanceModule {
  name: string;
  /** What the module does, in a line. */
  summary: string;
  /** When the suite asks a human to look at a page (a screenshot), what this runner checks in the HTML instead. */
  review?: string;
  /** The suite variant that differs between plans (e.g. discovery with a static or a dynamic client). */
  variant?: string;
  /** Waits on purpose (a 30 s code reuse delay): started first so the run takes no longer than it must. */
  slow?: boolean;
  run(ctx: ModuleContext): Promise<void>;
}

export type Status = 'pass' | 'fail' | 'not supported' | 'operator action' | 'not run';

/** The evidence of one failed check: what the suite expects, and the exchange that showed otherwise. */
export interface Failure {
  message: string;
  exchange?: Exchange;
}

export interface ModuleResult {
  plan: string;
  module: string;
  variant?: string;
  summary: string;
  status: Status;
  /** Why it failed, why it is not supported, what the operator must do. */
  reason?: string;
  failures: Failure[];
  warnings: string[];
  notes: string[];
  review?: string;
  seconds: number;
}
