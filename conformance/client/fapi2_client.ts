import { createHash, randomUUID } from 'node:crypto';

import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

import type { ModuleContext } from '../context.ts';
import type { Exchange } from '../http/exchange_log.ts';
import { jsonObject, type HttpResponse } from '../http/http_client.ts';
import type { Provider } from './provider.ts';
import { REDIRECT_URI, postRegistration, unregister, type Client } from './registration.ts';

/**
 * A FAPI 2.0 client as the suite's FAPI2 SP Final OP plan drives it, with the variants this
 * runner re-creates: client_auth_type private_key_jwt, sender_constrain dpop. Where the suite is
 * configured with a static client and its keys, this runner registers its own (RFC 7591), with a
 * fresh ES256 key whose private half it keeps for client assertions, and a second key for DPoP.
 */

/** The algorithms FAPI 2.0 allows (FAPI2CheckDiscEndpointIdTokenSigningAlgValuesSupported.FAPI2_ALLOWED_ALGS). */
export const FAPI2_ALLOWED_ALGS = ['PS256', 'ES256', 'EdDSA'];
export const CLIENT_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

export interface KeyPair {
  privateKey: CryptoKey;
  publicJwk: JWK;
}

export async function newKeyPair(alg: 'ES256' | 'RS256' = 'ES256'): Promise<KeyPair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, publicJwk: { ...await exportJWK(publicKey), alg, use: 'sig', kid: randomUUID() } };
}

export interface FapiClient extends Client {
  /** Signs its client assertions. */
  key: KeyPair;
  /** Its DPoP key (GenerateDpopKey). */
  dpopKey: KeyPair;
}

/** Registers a private_key_jwt client for the module (unregistered afterwards); the module stops when the OP refuses it. */
export async function registerFapiClient(ctx: ModuleContext, provider: Provider, moduleName: string, extraKeys: KeyPair[] = []): Promise<FapiClient> {
  const key = await newKeyPair();
  const request = {
    // The module's name without the plan's prefix: registration keeps names within 100 characters.
    client_name: `OIDF Conformance Test ${moduleName.replace(/^fapi2-security-profile-final-/, 'fapi2 ')}`.slice(0, 100),
    grant_types: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_method: 'private_key_jwt',
    jwks: { keys: [key.publicJwk, ...extraKeys.map((extra) => extra.publicJwk)] },
    response_types: ['code'],
    redirect_uris: [REDIRECT_URI],
    contacts: ['certification@oidf.org'],
  };
  const response = await postRegistration(ctx, provider, request);
  const body = jsonObject(response);
  ctx.require(response.status === 201 && typeof body?.client_id === 'string', `the OP refused to register a private_key_jwt client with an ES256 key (${response.status} ${response.text.slice(0, 300)})`);
  const client: FapiClient = {
    clientId: body.client_id, authMethod: 'private_key_jwt', redirectUri: REDIRECT_URI, request, registration: body, key, dpopKey: await newKeyPair(),
  };
  ctx.onCleanup(() => unregister(ctx, client));
  return client;
}

/** What a module changes in a client assertion (the suite's negative private_key_jwt modules). */
export interface AssertionOptions {
  claims?: Record<string, unknown>;
  /** Claims left out. */
  omit?: string[];
  /** Signed with another key (its alg and kid). */
  key?: KeyPair;
}

/** CreateClientAuthenticationAssertionClaims and SignClientAuthenticationAssertion: iss, sub, aud the issuer, jti, iat, exp 60 s on. */
export async function clientAssertion(client: FapiClient, provider: Provider, options: AssertionOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    iss: client.clientId, sub: client.clientId, aud: provider.metadata.issuer, jti: randomUUID(), iat: now, exp: now + 60, ...options.claims,
  };
  for (const name of options.omit ?? []) delete claims[name];
  const key = options.key ?? client.key;
  return new SignJWT(claims).setProtectedHeader({ alg: key.publicJwk.alg!, kid: key.publicJwk.kid! }).sign(key.privateKey);
}

/** The form fields of private_key_jwt authentication (AddClientAssertionToTokenEndpointRequest). */
export async function assertionForm(client: FapiClient, provider: Provider, options: AssertionOptions = {}): Promise<Record<string, string>> {
  return { client_assertion_type: CLIENT_ASSERTION_TYPE, client_assertion: await clientAssertion(client, provider, options) };
}

/** What a module changes in a DPoP proof (FAPI2SPFinalDpopNegativeTests and the iat modules). */
export interface ProofOptions {
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
  omit?: string[];
  /** Signed with another key than the one in its header (a bad signature). */
  signWith?: KeyPair;
  key?: KeyPair;
}

/** CreateDpopHeader / CreateDpopClaims / SignDpopProof: typ dpop+jwt, the public jwk, jti, htm, htu, iat (ath for a resource). */
export async function dpopProof(key: KeyPair, method: string, url: string, options: ProofOptions & { accessToken?: string; nonce?: string } = {}): Promise<string> {
  const { kid: _kid, use: _use, ...jwk } = key.publicJwk;
  const header: Record<string, unknown> = { typ: 'dpop+jwt', alg: key.publicJwk.alg, jwk, ...options.header };
  const claims: Record<string, unknown> = {
    jti: randomUUID(), htm: method, htu: url, iat: Math.floor(Date.now() / 1000),
    ...(options.accessToken ? { ath: createHash('sha256').update(options.accessToken).digest('base64url') } : {}),
    ...(options.nonce ? { nonce: options.nonce } : {}),
    ...options.claims,
  };
  for (const name of options.omit ?? []) delete claims[name];
  return new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign((options.signWith ?? key).privateKey);
}

export function thumbprint(key: KeyPair): Promise<string> {
  return calculateJwkThumbprint(key.publicJwk);
}

export interface EndpointResponse {
  response: HttpResponse;
  body: Record<string, unknown> | undefined;
  exchange: Exchange | undefined;
}

/**
 * A POST to the token or PAR endpoint with private_key_jwt and, unless `proof` is false, a DPoP
 * proof; a `use_dpop_nonce` answer is retried once with the server's nonce, as the suite does.
 */
export async function postWithDpop(
  ctx: ModuleContext, client: FapiClient, provider: Provider, url: string, form: Record<string, string>,
  options: { proof?: ProofOptions | false; assertion?: AssertionOptions | false } = {},
): Promise<EndpointResponse> {
  const send = async (nonce?: string) => {
    const auth = options.assertion === false ? { client_id: client.clientId } : await assertionForm(client, provider, options.assertion);
    const headers: Record<string, string> = {};
    if (options.proof !== false) headers.dpop = await dpopProof(options.proof?.key ?? client.dpopKey, 'POST', url, { ...options.proof, nonce });
    const response = await ctx.http.postForm(url, { ...form, ...auth }, headers);
    return { response, body: jsonObject(response), exchange: ctx.log.last() };
  };
  const first = await send();
  const nonce = first.response.headers.get('dpop-nonce');
  if (options.proof !== false && first.body?.error === 'use_dpop_nonce' && nonce) return send(nonce);
  return first;
}

/** A call to a resource (the userinfo endpoint) with a DPoP-bound token: `Authorization: DPoP`, a proof with `ath`. */
export async function resourceWithDpop(ctx: ModuleContext, client: FapiClient, url: string, accessToken: string, options: { scheme?: string; proof?: ProofOptions | false } = {}): Promise<HttpResponse> {
  const send = async (nonce?: string) => {
    const headers: Record<string, string> = { accept: 'application/json', authorization: `${options.scheme ?? 'DPoP'} ${accessToken}` };
    if (options.proof !== false) headers.dpop = await dpopProof(options.proof?.key ?? client.dpopKey, 'GET', url, { ...options.proof, accessToken, nonce });
    return ctx.http.send({ method: 'GET', url, headers });
  };
  const first = await send();
  const nonce = first.headers.get('dpop-nonce');
  if (options.proof !== false && first.status === 401 && /use_dpop_nonce/.test(first.headers.get('www-authenticate') ?? '') && nonce) return send(nonce);
  return first;
}
