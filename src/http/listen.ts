import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { ConfigError } from '../../config/index.ts';

/** An address the service was told to listen on and could not: a configuration matter, said in one line. */
export class ListenError extends ConfigError {
  override name = 'ListenError';
}

const REASONS: Readonly<Record<string, string>> = {
  EADDRINUSE: 'is in use by another process',
  EACCES: 'may not be used by this user',
  EADDRNOTAVAIL: 'is not an address of this host',
  ENOTFOUND: 'names a host that does not resolve',
  EAI_AGAIN: 'names a host that could not be resolved now',
  EAI_FAIL: 'names a host that could not be resolved',
};

/** Listens on `host`:`port`; an address that cannot be had is a ListenError naming the variables that chose it. */
export async function listen(server: Server, port: number, host: string | undefined, variables: string): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException) => {
      const reason = error.code === undefined ? undefined : REASONS[error.code];
      reject(reason ? new ListenError(`${variables}: ${host ?? 'every interface'} port ${port} ${reason} (${error.code})`) : error);
    };
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
  return server.address() as AddressInfo;
}
