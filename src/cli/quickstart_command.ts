import { resolve } from 'node:path';

import { storeLocation } from '../../adapters/index.ts';
import type { Config } from '../../config/index.ts';
import { SCHEMA, type Env } from '../../config/schema.ts';
import { quote } from './quickstart_guide.ts';

/**
 * The quickstart command as the service announces it at first start: prefixed with the settings
 * the service was started with that the quickstart must share (where the service is reached,
 * the store, the keys that open it, and what its clients must do: PAR_REQUIRED, DPOP_REQUIRED and
 * FAPI decide whether the demo client pushes its requests or is not made at all), so that run in
 * another terminal it prints this service's URLs, writes to this service's store and makes a demo
 * client this service accepts. A setting whose value holds a secret is named, never repeated.
 */

const ADMIN_COMMAND = 'npm run admin --';
export const QUICKSTART_COMMAND = `${ADMIN_COMMAND} quickstart`;

export interface AnnouncedCommand {
  /** e.g. `PORT=41100 npm run admin -- quickstart`. */
  command: string;
  /** The same settings before any other admin command: e.g. `PORT=41100 npm run admin --`. */
  admin: string;
  /** Settings to set as for the service too, whose values are not shown (they hold a secret). */
  secretSettings: string[];
}

export function quickstartCommand(config: Config, env: Env): AnnouncedCommand {
  const settings: string[] = [];
  const secretSettings: string[] = [];
  const setting = (name: string, value: string) => settings.push(`${name}=${quote(value)}`);

  // BASE_URL unset means http://localhost:$PORT: then PORT is what the quickstart needs.
  if (config.issuer !== `http://localhost:${config.port}`) setting('BASE_URL', config.issuer);
  else if (String(config.port) !== SCHEMA.PORT.default) setting('PORT', String(config.port));
  if (config.store !== SCHEMA.STORE.default) {
    const store = storeLocation(config.store);
    if (store.credentials) secretSettings.push('STORE');
    else setting('STORE', store.url);
  }
  const key = config.keyEncryptionKey;
  if (key && 'file' in key) setting('KEY_ENCRYPTION_KEY_FILE', resolve(key.file));
  if (key && 'value' in key) secretSettings.push('KEY_ENCRYPTION_KEY');
  if (config.previousKeyEncryptionKeys.length > 0) secretSettings.push('KEY_ENCRYPTION_KEY_PREVIOUS');
  const configHome = env.XDG_CONFIG_HOME;
  if (key && 'created' in key && configHome) setting('XDG_CONFIG_HOME', configHome);
  if (config.jwksFile) setting('JWKS_FILE', resolve(config.jwksFile));
  const clientRules: Array<[string, boolean]> = [['PAR_REQUIRED', config.parRequired], ['DPOP_REQUIRED', config.dpopRequired], ['FAPI', config.fapi]];
  for (const [name, on] of clientRules) if (on) setting(name, 'on');
  return { command: [...settings, QUICKSTART_COMMAND].join(' '), admin: [...settings, ADMIN_COMMAND].join(' '), secretSettings };
}
