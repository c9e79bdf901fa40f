/**
 * The service's configuration lives in config/ at the top of the project: every variable with its
 * default, meaning and validation in config/schema.ts, loadConfig and the rules between variables
 * in config/index.ts. This module keeps the import path the code has always used.
 */
export * from '../config/index.ts';
