import type { Env } from './schema.ts';
import type { Config } from './types.ts';

/**
 * A setting given that another makes moot: the service runs as the other says. Reported at start
 * (by name, never by value), as misspelled ones are, so that an operator who set `PAR_REQUIRED=off`
 * beside `FAPI=on` learns it has no effect rather than believing it has.
 */
export interface MootSetting {
  name: string;
  /** The setting that decides instead, and what it decides. */
  because: string;
}

export function mootSettings(env: Env, config: Config): MootSetting[] {
  const given = (name: string) => (env[name] ?? '').trim() !== '';
  const moot = (names: readonly string[], because: string) => names.filter(given).map((name) => ({ name, because }));
  return [
    ...(config.fapi && !config.parRequired ? moot(['PAR_REQUIRED'], 'FAPI=on pushes every authorization request (FAPI 2.0)') : []),
    ...(config.fapi && config.pkceRequired !== 'all' ? moot(['PKCE_REQUIRED'], 'FAPI=on requires PKCE of every client (FAPI 2.0)') : []),
    ...(config.cimd ? [] : moot(['CIMD_TRUSTED_HOSTS', 'CIMD_ALLOWED_DOMAINS'], 'CIMD=off fetches no metadata document')),
    ...(config.metrics ? [] : moot(['METRICS_HOST', 'METRICS_PORT', 'METRICS_TOKEN'], 'METRICS=off serves no metrics')),
    ...(config.metrics?.where === 'public' ? moot(['METRICS_HOST', 'METRICS_PORT'], 'METRICS=public serves the metrics on PORT') : []),
  ];
}
