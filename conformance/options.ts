import { parseArgs } from 'node:util';

import { DEFAULT_PLANS, moduleNames, PLAN_ALIASES, PLAN_NAMES, type PlanName } from './plans.ts';

export const USAGE = `Usage: npm run conformance -- --base-url URL --email EMAIL --password PASSWORD [options]

Runs this project's re-creation of the OpenID Foundation conformance suite's OP test plans
(${PLAN_NAMES.join(', ')})
against a deployment: it registers its own clients, signs in as the given user on the OP's login
page and allows on its consent page. Run the server with PKCE_REQUIRED=public: the OpenID Connect
plans send no PKCE.

  --base-url URL                the issuer (discovery at URL/.well-known/openid-configuration)
  --email EMAIL, --password PASSWORD
                                a user who can sign in and consent (a member of a workspace)
  --initial-access-token TOKEN  for a server with REGISTRATION=initial_access_token
  --plan NAME                   repeatable: basic, formpost, config, dynamic, fapi2, logout or a full plan name
                                (default: basic and config, the plans a code-flow OP certifies for;
                                formpost runs the basic plan's modules with response_mode=form_post;
                                logout is the RP-initiated logout plan; the dynamic
                                plan's discovery module requires the implicit flow, which this server
                                refuses; fapi2 needs FAPI 2.0 clients: a server with FAPI=on, or an
                                --initial-access-token made with iat create --fapi)
  --module NAME                 repeatable: only these modules (the suite's names)
  --rotate-keys-command CMD     a shell command that rotates the OP's signing keys, run by
                                oidcc-server-rotate-keys between its two reads of the JWKS (e.g.
                                "npm run admin -- keys rotate"); without it that module is an operator action
  --json                        print the results as JSON on stdout (the table goes to stderr)
  -h, --help

Exit code: 0 when no module fails, 1 when one does, 2 on bad usage or when --base-url cannot be reached.`;

export interface RunOptions {
  baseUrl: string;
  email: string;
  password: string;
  initialAccessToken?: string;
  plans: PlanName[];
  modules: string[];
  rotateKeysCommand?: string;
  json: boolean;
}

export class UsageError extends Error {
  override name = 'UsageError';
}

/** The options, or undefined when help was asked for; a UsageError says what is wrong. */
export function parseOptions(argv: string[]): RunOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      'base-url': { type: 'string' },
      email: { type: 'string' },
      password: { type: 'string' },
      'initial-access-token': { type: 'string' },
      plan: { type: 'string', multiple: true },
      module: { type: 'string', multiple: true },
      'rotate-keys-command': { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) return undefined;
  const baseUrl = required(values['base-url'], '--base-url');
  if (!URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol)) throw new UsageError(`--base-url must be an http(s) URL, got ${baseUrl}`);
  return {
    baseUrl: baseUrl.replace(/\/$/, ''),
    email: required(values.email, '--email'),
    password: required(values.password, '--password'),
    initialAccessToken: values['initial-access-token'],
    plans: plansFrom(values.plan ?? []),
    modules: modulesFrom(values.module ?? []),
    rotateKeysCommand: values['rotate-keys-command'] || undefined,
    json: values.json,
  };
}

function required(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`${flag} is required`);
  return value;
}

function plansFrom(given: string[]): PlanName[] {
  if (given.length === 0) return [...DEFAULT_PLANS];
  return given.map((name) => {
    const plan = PLAN_ALIASES[name] ?? PLAN_NAMES.find((known) => known === name);
    if (!plan) throw new UsageError(`unknown plan ${name}; known: ${Object.keys(PLAN_ALIASES).join(', ')}, ${PLAN_NAMES.join(', ')}`);
    return plan;
  });
}

function modulesFrom(given: string[]): string[] {
  const known = moduleNames();
  const unknown = given.filter((name) => !known.includes(name));
  if (unknown.length > 0) throw new UsageError(`unknown module ${unknown.join(', ')}; known modules:\n  ${known.join('\n  ')}`);
  return given;
}
