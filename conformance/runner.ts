import { ModuleContext, ModuleEnded, ModuleStopped, type Target } from './context.ts';
import type { ConformanceModule, ModuleResult } from './module.ts';
import type { PlanEntry } from './plans.ts';

/** Modules run side by side: each has its own client and browser, as each suite module does. */
const CONCURRENCY = 6;

/** Runs every entry, slow ones first, at most CONCURRENCY at a time; results in plan order. */
export async function runAll(entries: PlanEntry[], target: Target): Promise<ModuleResult[]> {
  const results = new Array<ModuleResult>(entries.length);
  const queue = entries.map((entry, index) => ({ entry, index })).sort((a, b) => Number(b.entry.module.slow ?? false) - Number(a.entry.module.slow ?? false));
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      results[next.index] = await runOne(next.entry, target);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, entries.length) }, worker));
  return results;
}

async function runOne({ plan, module, responseMode }: PlanEntry, target: Target): Promise<ModuleResult> {
  const ctx = new ModuleContext(target, responseMode);
  const started = performance.now();
  const ended = await outcomeOf(module, ctx);
  await ctx.cleanUp().catch(() => {});
  const seconds = Math.round((performance.now() - started) / 100) / 10;
  const base = { plan, module: module.name, variant: module.variant, summary: module.summary, failures: ctx.failures, warnings: ctx.warnings, notes: ctx.notes, review: module.review, seconds };
  if (ctx.failures.length > 0) return { ...base, status: 'fail', reason: ctx.failures.map((failure) => failure.message).join('; ') };
  if (ended) return { ...base, status: ended.status, reason: ended.reason };
  return { ...base, status: 'pass' };
}

/** Runs the module; a failed required check or an unexpected error ends it as a failure. */
async function outcomeOf(module: ConformanceModule, ctx: ModuleContext): Promise<ModuleEnded | undefined> {
  try {
    await module.run(ctx);
    return undefined;
  } catch (error) {
    if (error instanceof ModuleEnded) return error;
    if (!(error instanceof ModuleStopped)) ctx.failures.push({ message: `the module could not complete: ${error instanceof Error ? error.message : String(error)}`, exchange: ctx.log.last() });
    return undefined;
  }
}
