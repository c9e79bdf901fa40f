import { parse, type ParsedUrlQuery } from 'node:querystring';

import { decodeJwt } from 'jose';
import type { Context } from 'koa';

import { ENGINE_BODY_LIMIT } from '../engine/body_limit.ts';
import { peekBody } from './request_body.ts';

/** A token request's form, parsed as the engine parses it (node:querystring), so both read the same values. */
export class TokenRequestForm {
  readonly #fields: ParsedUrlQuery;

  constructor(body: string) {
    this.#fields = parse(body);
  }

  /** Every value of the parameter, in order. */
  getAll(name: string): string[] {
    const value = this.#fields[name];
    return value === undefined ? [] : typeof value === 'string' ? [value] : value;
  }

  /** The parameter's first value, or null. */
  get(name: string): string | null {
    return this.getAll(name)[0] ?? null;
  }
}

const FORMS = new WeakMap<Context, TokenRequestForm | undefined>();

/**
 * A token request's form parameters, read before the engine runs (the rate limits want the
 * client_id, the resource check the resource) without taking the body from the engine: read once
 * per request and put back (peekBody). Undefined for a body that is not a form, or one the engine
 * refuses anyway.
 */
export async function tokenRequestForm(ctx: Context): Promise<TokenRequestForm | undefined> {
  if (FORMS.has(ctx)) return FORMS.get(ctx);
  let form: TokenRequestForm | undefined;
  if (ctx.is('application/x-www-form-urlencoded')) {
    const body = await peekBody(ctx.req, ctx.request.length, ENGINE_BODY_LIMIT);
    form = body ? new TokenRequestForm(body.toString('utf8')) : undefined;
  }
  FORMS.set(ctx, form);
  return form;
}

/**
 * The client_id a token request names, before the engine reads it: from HTTP Basic
 * (RFC 6749 2.3.1, form-encoded id), else from the form body, else from the `sub` of a client
 * assertion (RFC 7523 3; not verified here: only a request the engine then answers with success is
 * counted against that client). Undefined when it names none, or not exactly one (the engine
 * refuses those itself).
 */
export async function tokenRequestClientId(ctx: Context): Promise<string | undefined> {
  const basic = basicClientId(ctx.get('authorization'));
  if (basic !== undefined) return basic;
  const form = await tokenRequestForm(ctx);
  const ids = form?.getAll('client_id') ?? [];
  if (ids.length > 0) return ids.length === 1 && ids[0] ? ids[0] : undefined;
  const assertions = form?.getAll('client_assertion') ?? [];
  return assertions.length === 1 ? assertionSubject(assertions[0]!) : undefined;
}

function assertionSubject(assertion: string): string | undefined {
  try {
    const { sub } = decodeJwt(assertion);
    return typeof sub === 'string' && sub ? sub : undefined;
  } catch {
    return undefined;
  }
}

function basicClientId(header: string): string | undefined {
  const [scheme, credentials] = header.split(' ');
  if (scheme?.toLowerCase() !== 'basic' || !credentials) return undefined;
  const decoded = Buffer.from(credentials, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 1) return undefined;
  try {
    return decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, '%20'));
  } catch {
    return undefined;
  }
}
