import { expect } from 'chai';

import type { LoadResult } from '../../bench/load/load.ts';
import type { ScenarioRun } from '../../bench/load/rounds.ts';
import { summarize } from '../../bench/report/report.ts';

function round(requestsPerSecond: number): LoadResult {
  return {
    requests: requestsPerSecond * 5, seconds: 5, requestsPerSecond, latencyP50: 5, latencyP99: 20, errors: 0, wrongBodies: 0,
    statusCodes: { 200: requestsPerSecond * 5 }, socketErrors: 0, cutShort: false, serverCores: 1, serverMainThreadCores: 0.9, benchCores: 0.2,
    serverRssBytes: 100e6,
  };
}

function run(rounds: Partial<Record<'service' | 'service_off' | 'baseline', number[]>>): ScenarioRun {
  const sides = (values: number[] = []) => values.map(round);
  return {
    scenario: 'client_credentials',
    summary: 'POST /oauth/token grant_type=client_credentials',
    rounds: { service: sides(rounds.service), service_off: sides(rounds.service_off), service_durable: [], baseline: sides(rounds.baseline) },
    rssBefore: { service: undefined, service_off: undefined, service_durable: undefined, baseline: undefined },
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
});
