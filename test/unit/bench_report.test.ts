import { expect } from 'chai';

import type { LoadResult } from '../../bench/load/load.ts';
import type { ScenarioRun } from '../../bench/load/rounds.ts';
import { formatReport, summarize } from '../../bench/report/report.ts';
import type { MachineInfo } from '../../bench/report/machine.ts';

function round(requestsPerSecond: number): LoadResult {
  return {
    requests: requestsPerSecond * 5, seconds: 5, requestsPerSecond, latencyP50: 5, latencyP99: 20, errors: 0, wrongBodies: 0,
    statusCodes: { 200: requestsPerSecond * 5 }, socketErrors: 0, cutShort: false, serverCores: 1, serverMainThreadCores: 0.9, benchCores: 0.2,
    serverRssBytes: 100e6,
  };
}

function run(rounds: Partial<Record<'service' | 'service_off' | 'service_rev' | 'baseline', number[]>>): ScenarioRun {
  const sides = (values: number[] = []) => values.map(round);
  return {
    scenario: 'client_credentials',
    summary: 'POST /oauth/token grant_type=client_credentials',
    rounds: { service: sides(rounds.service), service_off: sides(rounds.service_off), service_durable: [], service_rev: sides(rounds.service_rev), baseline: sides(rounds.baseline) },
    rssBefore: { service: undefined, service_off: undefined, service_durable: undefined, service_rev: undefined, baseline: undefined },
  };
}

/** The bench's ratios compare the rounds that ran side by side, on a machine whose speed drifts over a run. */
describe('bench report ratios', () => {
  it('compares each round with the round run beside it, so the machine speeding up mid-run does not decide the ratio', () => {
    // Every pair says 0.8x, except the last, where the machine sped up between the two rounds of the pair.
    const summary = summarize(run({ service: [800, 2400, 1600], baseline: [1000, 3000, 2500] }), undefined);
    expect(summary.ratio).to.be.closeTo(0.8, 1e-9);
    // The medians of each side alone (1,600 and 2,500 req/s) would have said 0.64x.
    expect(summary.sides.service.requestsPerSecond / summary.sides.baseline!.requestsPerSecond).to.be.closeTo(0.64, 1e-9);
  });

  it('pairs the service with and without rate limits and metrics the same way', () => {
    const summary = summarize(run({ service: [950, 2850, 1900], service_off: [1000, 3000, 1400], baseline: [1000, 3000, 2000] }), undefined);
    expect(summary.againstOff).to.be.closeTo(0.95, 1e-9);
    expect(summary.offRatio).to.be.closeTo(1, 1e-9);
  });

  it('pairs the service with another commit of it (--against) the same way, and says it in the report', () => {
    const summary = summarize(run({ service: [1100, 3300, 1650], service_rev: [1000, 3000, 1000], baseline: [2000, 6000, 2000] }), undefined);
    expect(summary.againstRev).to.be.closeTo(1.1, 1e-9);
    expect(summary.revRatio).to.be.closeTo(0.5, 1e-9);
    const machine: MachineInfo = {
      date: '2026-11-26', cpuModel: 'test CPU', cores: 2, node: 'v24', loadAverage: [0, 0, 0], revision: 'abc1234', engineVersion: '9.0.0',
    };
    const report = formatReport(machine, undefined, {
      store: 'sqlite', logLevel: 'warn', workers: 1, connections: 32, duration: 6, rounds: 3, warmup: 5, rssTokens: 1, together: true, against: 'def5678 (main~1)',
    }, [summary]);
    expect(report).to.include('service_rev: the service at def5678 (main~1)');
    expect(report).to.match(/^\s+service_rev\s+1,000\s+0\.50x/m);
    expect(report).to.include('service over service_rev: 1.10x req/s');
  });
});
