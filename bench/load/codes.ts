import { codeRequest, exchangeCode } from '../../test/support/oauth.ts';
import { UserAgent } from '../../test/support/user_agent.ts';
import type { Credentials } from './credentials.ts';

/** A fresh authorization code and the PKCE verifier it was requested with. */
export interface MintedCode {
  code: string;
  verifier: string;
}

/** Answers the server's login and consent pages, whichever they are, until the final redirect. */
export type AuthorizeDriver = (agent: UserAgent, authorizationUrl: string, origin: string) => Promise<URL>;

/**
 * Mints authorization codes over HTTP, as one signed-in user agent. The first request shows the
 * login and consent pages; after that the session and the remembered consent send every
 * /oauth/authorize straight back with a code, so minting is one request per code.
 */
export class CodeMinter {
  readonly #agent = new UserAgent();
  readonly #issuer: string;
  readonly #origin: string;
  readonly #client: Credentials;
  readonly #drive: AuthorizeDriver;

  constructor(issuer: string, client: Credentials, drive: AuthorizeDriver) {
    this.#issuer = issuer;
    this.#origin = new URL(issuer).origin;
    this.#client = client;
    this.#drive = drive;
  }

  async mint(scope = 'api profile'): Promise<MintedCode> {
    const request = codeRequest(this.#issuer, this.#client.client_id, { scope });
    const callback = await this.#drive(this.#agent, request.url, this.#origin);
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`authorization ended without a code: ${callback.href}`);
    return { code, verifier: request.verifier };
  }

  /**
   * Mints as many codes as `concurrency` parallel requests manage in `seconds` (at least `minimum`).
   * Codes live 60 s, so what is minted here must be redeemed right away.
   */
  async mintFor(seconds: number, concurrency: number, minimum: number): Promise<MintedCode[]> {
    const deadline = Date.now() + seconds * 1000;
    // The first one alone: parallel first visits would each get a login page and race for one session.
    const codes: MintedCode[] = [await this.mint()];
    const worker = async () => {
      while (Date.now() < deadline || codes.length < minimum) codes.push(await this.mint());
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return codes;
  }

  /** Redeems a fresh code: an access token and the start of a refresh-token chain. */
  async tokens(scope = 'api profile'): Promise<{ access_token: string; refresh_token?: string }> {
    const { code, verifier } = await this.mint(scope);
    const response = await exchangeCode(this.#issuer, this.#client, code, verifier);
    if (response.status !== 200) throw new Error(`code exchange failed ${response.status}: ${await response.text()}`);
    return response.json() as Promise<{ access_token: string; refresh_token?: string }>;
  }
}
