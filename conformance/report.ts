import type { Exchange } from './http/exchange_log.ts';
import type { ModuleResult, Status } from './module.ts';

const PLAN_LABELS: Record<string, string> = {
  'oidcc-basic-certification-test-plan': 'basic',
  'oidcc-formpost-basic-certification-test-plan': 'formpost',
  'oidcc-config-certification-test-plan': 'config',
  'oidcc-dynamic-certification-test-plan': 'dynamic',
  'oidcc-rp-initiated-logout-certification-test-plan': 'logout',
};

function moduleLabel(result: ModuleResult): string {
  return result.variant ? `${result.module} (${result.variant})` : result.module;
}

/** What the table says about a row besides its status. */
function detail(result: ModuleResult): string {
  const parts: string[] = [];
  if (result.reason) parts.push(result.reason);
  if (result.warnings.length > 0) parts.push(`warnings: ${result.warnings.join('; ')}`);
  if (result.notes.length > 0) parts.push(result.notes.join('; '));
  return parts.join(' | ');
}

export function formatTable(results: ModuleResult[]): string {
  const rows = results.map((result) => [PLAN_LABELS[result.plan] ?? result.plan, moduleLabel(result), result.status, detail(result)]);
  const widths = [0, 1, 2].map((column) => Math.max(...rows.map((row) => row[column]!.length), ['Plan', 'Module', 'Result'][column]!.length));
  const line = (cells: string[]) => cells.map((cell, index) => (index < 3 ? cell.padEnd(widths[index]!) : cell)).join('  ').trimEnd();
  return [line(['Plan', 'Module', 'Result', 'Details']), line(widths.map((width) => '-'.repeat(width)).concat('-------')), ...rows.map(line)].join('\n');
}

export function formatSummary(results: ModuleResult[]): string {
  const counts = new Map<Status, number>();
  for (const { status } of results) counts.set(status, (counts.get(status) ?? 0) + 1);
  return [...counts].map(([status, count]) => `${count} ${status}`).join(', ');
}

/** For each failure: what the suite expects, and the exact exchange that showed otherwise. */
export function formatFailures(results: ModuleResult[]): string {
  const sections: string[] = [];
  for (const result of results.filter((row) => row.status === 'fail')) {
    sections.push(`== ${PLAN_LABELS[result.plan] ?? result.plan} / ${moduleLabel(result)}`);
    for (const failure of result.failures) {
      sections.push(`- ${failure.message}`);
      if (failure.exchange) sections.push(indent(formatExchange(failure.exchange)));
    }
  }
  return sections.join('\n');
}

function formatExchange({ request, response, error }: Exchange): string {
  const lines = [`${request.method} ${request.url}`];
  for (const [name, value] of Object.entries(request.headers)) lines.push(`${name}: ${value}`);
  if (request.body !== undefined && request.body !== '') lines.push('', request.body);
  if (error) lines.push(`=> no response: ${error}`);
  if (response) {
    lines.push(`=> ${response.status}`);
    for (const [name, value] of Object.entries(response.headers)) lines.push(`   ${name}: ${value}`);
    if (response.body) lines.push(`   ${response.body.length > 600 ? `${response.body.slice(0, 600)}…` : response.body}`);
  }
  return lines.join('\n');
}

function indent(text: string): string {
  return text.split('\n').map((line) => `    ${line}`).join('\n');
}

export function jsonReport(target: string, results: ModuleResult[]): string {
  return JSON.stringify({ target, results }, null, 2);
}
