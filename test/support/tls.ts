import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A throwaway certificate authority and a server certificate it signed, as PEM, with the CA's file for NODE_EXTRA_CA_CERTS. */
export interface TestCertificates {
  /** The CA certificate's file: what NODE_EXTRA_CA_CERTS names for the service. */
  caFile: string;
  /** For an https server on loopback: valid for localhost, 127.0.0.1 and ::1. */
  key: string;
  cert: string;
  remove(): Promise<void>;
}

/**
 * Makes a CA and a server certificate with Debian's openssl, in a temporary folder: an https server
 * of the test's own, which the service trusts only because it was given the CA (NODE_EXTRA_CA_CERTS),
 * as an internal deployment's would be. Nothing of it outlives the run.
 */
export async function testCertificates(): Promise<TestCertificates> {
  const dir = await mkdtemp(join(tmpdir(), 'tls-'));
  const at = (name: string) => join(dir, name);
  const openssl = (args: string[]) => run('openssl', args, { cwd: dir });
  await openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2',
    '-subj', '/CN=Throwaway test CA', '-keyout', at('ca.key'), '-out', at('ca.pem'),
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  await openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=localhost',
    '-keyout', at('server.key'), '-out', at('server.csr')]);
  await writeFile(at('server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\n');
  await openssl(['x509', '-req', '-in', at('server.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca.key'), '-CAcreateserial',
    '-days', '2', '-extfile', at('server.ext'), '-out', at('server.pem')]);
  return {
    caFile: at('ca.pem'),
    key: await readFile(at('server.key'), 'utf8'),
    cert: await readFile(at('server.pem'), 'utf8'),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
