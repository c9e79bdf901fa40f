import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { expect } from 'chai';

import { ConfigError, loadConfig } from '../src/config.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function configError(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a configuration error');
}

describe('configuration', () => {
  it('defaults to http://localhost:3000 with the SQLite file under ./data/', () => {
    const config = loadConfig({});
    expect(config.issuer).to.equal('http://localhost:3000');
    expect(config.port).to.equal(3000);
    expect(config.store).to.equal('sqlite:./data/oauth.sqlite');
    expect(config.registration).to.equal('open');
    expect(config.trustProxy).to.equal(false);
  });

  it('takes an issuer with a path and strips a trailing slash', () => {
    const config = loadConfig({ BASE_URL: 'https://id.example.com/auth/' });
    expect(config.issuer).to.equal('https://id.example.com/auth');
    expect(config.basePath).to.equal('/auth');
  });

  it('names the variable in every refusal', () => {
    expect(configError({ PORT: 'eighty' })).to.match(/^PORT/);
    expect(configError({ BASE_URL: 'not a url' })).to.match(/^BASE_URL/);
    expect(configError({ BASE_URL: 'https://id.example.com/?x=1' })).to.match(/^BASE_URL/);
    expect(configError({ BASE_URL: 'http://id.example.com' })).to.match(/^BASE_URL must use https/);
    expect(configError({ STORE: 'postgres://db' })).to.match(/^STORE/);
    expect(configError({ TRUST_PROXY: 'maybe' })).to.match(/^TRUST_PROXY/);
    expect(configError({ LOG_LEVEL: 'loud' })).to.match(/^LOG_LEVEL/);
    expect(configError({ REGISTRATION: 'closed' })).to.match(/^REGISTRATION/);
  });

  it('stops the service at start with a message naming the bad variable', () => {
    const result = spawnSync(process.execPath, ['src/main.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', STORE: 'memory:', PORT: '70000' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).to.equal(1);
    expect(result.stderr).to.match(/configuration error: PORT must be/);
    expect(result.stderr).to.not.match(/\n\s+at /);
  });
});
