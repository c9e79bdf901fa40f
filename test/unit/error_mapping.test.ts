import type { AddressInfo } from 'node:net';

import { expect } from 'chai';
import Koa from 'koa';

import { errorMapping } from '../../src/http/errors.ts';
import type { LogFields, Logger } from '../../src/shared/logger.ts';

/** A logger that keeps its lines. */
function keptLines(): { logger: Logger; lines: Array<{ level: string; message: string; fields: LogFields }> } {
  const lines: Array<{ level: string; message: string; fields: LogFields }> = [];
  const keep = (level: string) => (message: string, fields: LogFields = {}) => { lines.push({ level, message, fields }); };
  const logger: Logger = { debug: keep('debug'), info: keep('info'), warn: keep('warn'), error: keep('error') };
  return { logger, lines };
}

describe('the error mapping', () => {
  it('answers a fault below it with a bare 500 and logs it with the status the client was sent, not the one it had reached', async () => {
    const { logger, lines } = keptLines();
    const app = new Koa();
    app.use(errorMapping(logger));
    app.use(() => {
      throw new Error('a fault of the service');
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const response = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/anywhere`);
      expect(response.status).to.equal(500);
      const body = await response.json() as Record<string, unknown>;
      expect(body).to.include({ error: 'server_error' });
      expect(JSON.stringify(body)).to.not.include('a fault of the service');
      const failed = lines.find((line) => line.message === 'request failed');
      expect(failed?.level).to.equal('error');
      expect(failed?.fields).to.include({ status: 500, detail: 'a fault of the service' });
    } finally {
      server.close();
    }
  });
});
