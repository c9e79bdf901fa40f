import fc, { type Arbitrary, type IAsyncProperty } from 'fast-check';

import { acceptHeaders, assertProperty, contentTypes, fuzzParameters, type FuzzSettings } from './harness.ts';
import { BROWSER_ACCEPT, type Expectation } from './checks.ts';
import type { FuzzWorld } from './fixtures.ts';
import type { RawRequest } from './http.ts';

/** What every group of properties (test/fuzz/*.ts) gets from the suite (test/fuzz.test.ts). */
export interface FuzzSuite {
  /** The running world, started by the suite's `before`. */
  world(): FuzzWorld;
  expectation(surface: Expectation['surface'], extra?: Partial<Expectation>): Expectation;
  /** fc.assert with FUZZ_RUNS (times `share`, for costly properties) and regression examples run first. */
  check<T>(property: IAsyncProperty<T>, share?: number, examples?: T[]): Promise<void>;
  /** Mocha's limit for a property: a generous budget per case (a login case hashes a password). */
  timeout(share?: number): number;
}

export function fuzzSuite(settings: FuzzSettings, world: () => FuzzWorld): FuzzSuite {
  return {
    world,
    expectation: (surface, extra = {}) => ({ surface, issuer: world().server.issuer, redirectUris: world().redirectUris, ...extra }),
    check: (property, share = 1, examples = []) => assertProperty(property, fuzzParameters(settings, share, examples)),
    timeout: (share = 1) => 30_000 + Math.round(settings.runs * share) * 500,
  };
}

export type Header = string | string[] | undefined;

/** Headers without the ones left out. */
export function headers(values: Record<string, Header>): Record<string, string | string[]> {
  return Object.fromEntries(Object.entries(values).filter((entry): entry is [string, string | string[]] => entry[1] !== undefined));
}

export function post(path: string, body: Buffer, contentType: Header, extra: Record<string, Header> = {}): RawRequest {
  return { method: 'POST', path, headers: headers({ 'content-type': contentType, ...extra }), body };
}

/** Content-Type: the right one mostly, sometimes anything. */
export function mostly(right: string): Arbitrary<Header> {
  return fc.oneof({ weight: 7, arbitrary: fc.constant<Header>(right) }, { weight: 1, arbitrary: contentTypes });
}

/** Accept for a page: a browser's mostly, sometimes anything. */
export const pageAccept: Arbitrary<string | undefined> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<string | undefined>(BROWSER_ACCEPT) },
  { weight: 1, arbitrary: acceptHeaders },
);
