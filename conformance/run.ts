/**
 * `npm run conformance`: this project's black-box re-creation of the OpenID Foundation
 * conformance suite's OP test plans (basic, form post basic, config, FAPI 2.0, RP-initiated logout, and the dynamic plan's modules that need no
 * client-side keys or remote documents), for an operator to point at their own deployment.
 * See `npm run conformance -- --help`.
 */
import { clientPublicJwks, type Target } from './context.ts';
import { parseOptions, USAGE, UsageError, type RunOptions } from './options.ts';
import { planEntries } from './plans.ts';
import { unreachableReason } from './preflight.ts';
import { formatFailures, formatSummary, formatTable, jsonReport } from './report.ts';
import { runAll } from './runner.ts';

function options(): RunOptions {
  try {
    const parsed = parseOptions(process.argv.slice(2));
    if (parsed) return parsed;
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  } catch (error) {
    if (!(error instanceof UsageError) && !(error instanceof TypeError)) throw error;
    process.stderr.write(`${error.message}\n\n${USAGE}\n`);
    process.exit(2);
  }
}

const run = options();
const unreachable = await unreachableReason(run.baseUrl);
if (unreachable) {
  process.stderr.write(`${unreachable}\n`);
  process.exit(2);
}
const target: Target = {
  issuer: run.baseUrl,
  credentials: { email: run.email, password: run.password },
  initialAccessToken: run.initialAccessToken,
  clientJwks: await clientPublicJwks(),
  rotateKeysCommand: run.rotateKeysCommand,
};
const entries = planEntries(run.plans, run.modules);
// With --json, stdout is the JSON alone; everything for people goes to stderr.
const human = run.json ? process.stderr : process.stdout;
human.write(`Running ${entries.length} modules against ${run.baseUrl}\n`);
const results = await runAll(entries, target);
human.write(`\n${formatTable(results)}\n\n${formatSummary(results)}\n`);
const failures = formatFailures(results);
if (failures) human.write(`\nFailures, with the exchange that showed each:\n${failures}\n`);
if (run.json) process.stdout.write(`${jsonReport(run.baseUrl, results)}\n`);
process.exitCode = results.some((result) => result.status === 'fail') ? 1 : 0;
