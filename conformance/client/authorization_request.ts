import { createHash, randomInt } from 'node:crypto';

import type { ResponseMode } from '../plans.ts';
import type { Client } from './registration.ts';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/**
 * The suite's CreateRandomStateValue / CreateRandomNonceValue: 10 alphanumeric characters, or for
 * a longer value all but four alphanumeric and then "-._~" (to check any URL-safe character survives).
 */
export function randomValue(length = 10): string {
  const body = Array.from({ length: length > 10 ? length - 4 : length }, () => ALPHANUMERIC[randomInt(ALPHANUMERIC.length)]).join('');
  return length > 10 ? `${body}-._~` : body;
}

/** An authorization request as the client means it; `params` is what goes on the wire. */
export interface AuthorizationRequest {
  params: Record<string, string>;
  state?: string;
  nonce?: string;
  codeVerifier?: string;
}

export interface RequestOptions {
  scope?: string;
  /** Leave the nonce out (oidcc-ensure-request-without-nonce-succeeds-for-code-flow). */
  withoutNonce?: boolean;
  stateLength?: number;
  nonceLength?: number;
  /** Parameters added after the standard ones (prompt, max_age, display, ...). */
  extra?: Record<string, string>;
  /** Parameters removed (response_type, redirect_uri). */
  omit?: string[];
  /** Send PKCE (S256), as only oidcc-ensure-request-with-valid-pkce-succeeds does. */
  pkce?: boolean;
}

/** Who asks: the module's client, under its plan's response_mode variant. */
export interface Requester {
  client: Client;
  responseMode: ResponseMode;
}

/**
 * CreateAuthorizationEndpointRequestFromClientInformation and the steps after it: client_id,
 * redirect_uri, scope (openid unless a module says otherwise), state, nonce, response_type=code,
 * and for the form post plans response_mode=form_post (SetAuthorizationEndpointRequestResponseModeToFormPost).
 */
export function authorizationRequest({ client, responseMode }: Requester, options: RequestOptions = {}): AuthorizationRequest {
  const state = randomValue(options.stateLength);
  const nonce = options.withoutNonce ? undefined : randomValue(options.nonceLength);
  const params: Record<string, string> = {
    client_id: client.clientId,
    redirect_uri: client.redirectUri,
    scope: options.scope ?? 'openid',
    state,
    ...(nonce === undefined ? {} : { nonce }),
    response_type: 'code',
    ...(responseMode === 'form_post' ? { response_mode: 'form_post' } : {}),
  };
  let codeVerifier: string | undefined;
  if (options.pkce) {
    codeVerifier = randomValue(50);
    params.code_challenge = createHash('sha256').update(codeVerifier).digest('base64url');
    params.code_challenge_method = 'S256';
  }
  Object.assign(params, options.extra);
  for (const name of options.omit ?? []) delete params[name];
  return { params, state, nonce, codeVerifier };
}

/**
 * BuildPlainRedirectToAuthorizationEndpoint: the parameters in alphabetical order (reversed for
 * oidcc-alternate-happy-flow, which checks the OP does not depend on an order).
 */
export function authorizationUrl(endpoint: string, params: Record<string, string>, order: 'sorted' | 'reversed' = 'sorted'): string {
  const url = new URL(endpoint);
  const names = Object.keys(params).sort();
  if (order === 'reversed') names.reverse();
  for (const name of names) url.searchParams.append(name, params[name]!);
  return url.href;
}
