/**
 * Summarises a V8 CPU profile (`npm run bench -- --profile DIR` writes one per server): self time
 * grouped by package or project file, then the busiest functions. Usage:
 *   node bench/report/profile_summary.ts FILE.cpuprofile [rows]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const ROOT = new URL('../..', import.meta.url).href;

/** `koa`, `oidc-provider`, `src/clients/client_cache.ts`, `node:internal/crypto/util`, or V8's own `(garbage collector)`. */
function groupOf({ url, functionName }: ProfileNode['callFrame']): string {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  if (url.startsWith(ROOT)) return url.slice(ROOT.length);
  if (url) return url.startsWith('node:') ? url : `node:${url}`;
  return functionName || '(native)';
}

function summarise(profile: CpuProfile, rows: number): string {
  const selfTime = new Map<number, number>();
  profile.samples.forEach((id, index) => selfTime.set(id, (selfTime.get(id) ?? 0) + (profile.timeDeltas[index] ?? 0)));
  const total = [...selfTime.values()].reduce((sum, value) => sum + value, 0);
  const byGroup = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const node of profile.nodes) {
    const time = selfTime.get(node.id);
    if (!time) continue;
    const group = groupOf(node.callFrame);
    byGroup.set(group, (byGroup.get(group) ?? 0) + time);
    const name = `${node.callFrame.functionName || '(anonymous)'}  ${group}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + time);
  }
  const table = (times: Map<string, number>) => [...times]
    .sort((a, b) => b[1] - a[1])
    .slice(0, rows)
    .map(([name, time]) => `${((100 * time) / total).toFixed(1).padStart(6)}%  ${name}`)
    .join('\n');
  return `${(total / 1e6).toFixed(1)} s sampled\n\nby package or file:\n${table(byGroup)}\n\nby function:\n${table(byFunction)}\n`;
}

const [file, rows = '25'] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node bench/report/profile_summary.ts FILE.cpuprofile [rows]\n');
  process.exitCode = 2;
} else {
  process.stdout.write(summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, Number(rows)));
}
