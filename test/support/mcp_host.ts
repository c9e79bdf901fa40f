import { randomBytes } from 'node:crypto';

import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

export type ClientAuthMethod = 'client_secret_post' | 'client_secret_basic' | 'none';

export interface McpHostOptions {
  /** How it authenticates at the token endpoint when it registers itself; `none` by default. */
  method?: ClientAuthMethod;
  /** Its Client ID Metadata Document's URL: with it, the host never registers. */
  clientMetadataUrl?: string;
}

/**
 * What an MCP host keeps for one server, in memory, for the SDK's `auth()`: its registration (or
 * its metadata document's URL), tokens and PKCE verifier. The authorization URLs the SDK sends the
 * user to are collected (a desktop host would open a browser), for the test to follow.
 */
export class McpHostProvider implements OAuthClientProvider {
  readonly #redirectUrl: string;
  readonly #metadata: OAuthClientMetadata;
  readonly clientMetadataUrl: string | undefined;
  #client: OAuthClientInformationMixed | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier: string | undefined;
  #state: string | undefined;
  readonly redirects: URL[] = [];

  constructor(redirectUrl: string, options: McpHostOptions = {}) {
    const method = options.method ?? 'none';
    this.#redirectUrl = redirectUrl;
    this.clientMetadataUrl = options.clientMetadataUrl;
    this.#metadata = {
      redirect_uris: [redirectUrl],
      client_name: `MCP client (${method})`,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: method,
    };
  }

  get redirectUrl(): string {
    return this.#redirectUrl;
  }

  get clientMetadata(): OAuthClientMetadata {
    return this.#metadata;
  }

  state(): string {
    this.#state = randomBytes(16).toString('base64url');
    return this.#state;
  }

  lastState(): string | undefined {
    return this.#state;
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.#client;
  }

  saveClientInformation(clientInformation: OAuthClientInformationMixed): void {
    this.#client = clientInformation;
  }

  tokens(): OAuthTokens | undefined {
    return this.#tokens;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.#tokens = tokens;
  }

  redirectToAuthorization(authorizationUrl: URL): void {
    this.redirects.push(authorizationUrl);
  }

  saveCodeVerifier(codeVerifier: string): void {
    this.#verifier = codeVerifier;
  }

  codeVerifier(): string {
    if (!this.#verifier) throw new Error('no code verifier saved');
    return this.#verifier;
  }

  /** The tokens, which must be there. */
  currentTokens(): OAuthTokens {
    if (!this.#tokens) throw new Error('no tokens saved');
    return this.#tokens;
  }

  /** A registered client's full information, which must be there. */
  registered(): OAuthClientInformationMixed & { token_endpoint_auth_method?: string; client_name?: string } {
    if (!this.#client) throw new Error('no client information saved');
    return this.#client;
  }

  /** Forgets the access token, keeping the refresh token, as when it has expired. */
  expireAccessToken(): void {
    if (this.#tokens) this.#tokens = { ...this.#tokens, access_token: 'expired' };
  }
}
