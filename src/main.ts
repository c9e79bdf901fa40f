import type { Server } from 'node:http';

import { openStore } from '../adapters/index.ts';
import { ConfigError, loadConfig } from './config.ts';
import { createLogger } from './logger.ts';
import { KeyEncryptionError, loadKeyRing } from './oauth/key_encryption.ts';
import { KeyConfigError, loadKeys } from './oauth/keys.ts';
import { RevocationList } from './oauth/revocation_list.ts';
import { createService } from './server/app.ts';

/** Start-up: configuration, store, keys, the service, listen. Stops cleanly on SIGTERM and SIGINT. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const store = openStore(config.store);
  const keys = await loadKeys(store.settings, await loadKeyRing(config, logger), config.jwksFile);
  const revocations = new RevocationList(store.revocations);
  await revocations.start();
  const { app, accounts } = createService({ config, store, keys, revocations, logger });

  const server: Server = app.listen(config.port, config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  logger.info('listening', { issuer: config.issuer, port: config.port, store: config.store.split(':')[0] });

  if (await accounts.countUsers() === 0) {
    logger.warn('no users yet: create the first workspace and user with the admin CLI', {
      step1: 'npm run admin -- workspace create --name "My workspace"',
      step2: 'npm run admin -- user create --email you@example.com --name "Your Name" --workspace <workspace id> --role admin --password-stdin',
    });
  }

  const stop = async (signal: string) => {
    logger.info('stopping', { signal });
    server.close();
    server.closeAllConnections();
    revocations.stop();
    await store.close();
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((error: unknown) => {
  const known = error instanceof ConfigError || error instanceof KeyConfigError || error instanceof KeyEncryptionError || error instanceof TypeError;
  process.stderr.write(`${known ? `configuration error: ${(error as Error).message}` : (error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
