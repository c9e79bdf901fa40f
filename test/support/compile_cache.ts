import module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Node's compile cache for the test run and every Node process it starts. The suite starts a few
 * hundred (servers, CLI runs, children racing for a record), each loading the same modules; with
 * the cache each one skips compiling them again. Loaded first by mocha (.mocharc.json); processes
 * started with an env of their own get it through `compileCacheEnv`.
 */
process.env.NODE_COMPILE_CACHE ??= join(tmpdir(), 'workspace-oauth-server-test-compile-cache');
module.enableCompileCache(process.env.NODE_COMPILE_CACHE);

/** The variable that gives a child process the cache, for an env built from scratch. */
export function compileCacheEnv(): Record<string, string> {
  return process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {};
}
