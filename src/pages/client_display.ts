import { documentHost, isMetadataDocumentUrl } from '../clients/metadata_documents.ts';
import { cspOrigin } from './csp.ts';

/** Where a redirect URI sends the user, in words a person recognizes: the host, or the app scheme. */
export function redirectTarget(redirectUri: string): { label: string; formAction: string[] } {
  const url = URL.parse(redirectUri);
  if (!url) return { label: redirectUri, formAction: [] };
  if (url.protocol === 'https:' || url.protocol === 'http:') {
    const origin = cspOrigin(url);
    return { label: url.host, formAction: origin ? [origin] : [] };
  }
  return { label: url.protocol, formAction: [url.protocol] };
}

/** The registered metadata the pages show of an application (the engine's Client has these). */
export interface ClientMetadata {
  readonly clientName?: string | undefined;
  readonly logoUri?: string | undefined;
  readonly policyUri?: string | undefined;
  readonly tosUri?: string | undefined;
  readonly clientUri?: string | undefined;
}

/** What the login and consent pages show of the application asking. */
export interface ClientDisplay {
  name: string;
  /** The logo to show, and the origin the page's policy must open `img-src` to for it. */
  logo?: { src: string; origin: string };
  policyUri?: string;
  tosUri?: string;
  /** The application's own web page (`client_uri`, RFC 7591 section 2: shown as a link), and its host, which the link names. */
  website?: { href: string; host: string };
  /** Set when an operator let the application in; one that registered itself is labelled so on the consent page. */
  vetted?: true;
  /**
   * For an application that describes itself in a metadata document (its client_id is the
   * document's https URL): the host it lives at, which is who the application is (its name is
   * only what it calls itself).
   */
  documentHost?: string;
}

/**
 * The application's name, logo and documents (RFC 7591 `client_name`, `logo_uri`, `policy_uri`,
 * `tos_uri`, `client_uri`), as the pages may show them. The engine accepts only web URIs at registration;
 * this checks again, so a page never carries a `javascript:`, `data:` or other non-http(s) URL,
 * nor one with credentials in it, and shows a logo only if its origin can be named in the policy.
 */
export function clientDisplay(clientId: string, client: ClientMetadata | undefined, vetted = false): ClientDisplay {
  const host = isMetadataDocumentUrl(clientId) ? documentHost(clientId) : undefined;
  const display: ClientDisplay = { name: client?.clientName || host || clientId };
  if (vetted) display.vetted = true;
  if (host) display.documentHost = host;
  const logo = webUrl(client?.logoUri);
  const logoOrigin = logo && cspOrigin(logo);
  if (logo && logoOrigin) display.logo = { src: logo.href, origin: logoOrigin };
  const policy = webUrl(client?.policyUri);
  if (policy) display.policyUri = policy.href;
  const tos = webUrl(client?.tosUri);
  if (tos) display.tosUri = tos.href;
  const website = webUrl(client?.clientUri);
  if (website) display.website = { href: website.href, host: website.host };
  return display;
}

/** A document of the application's the pages link to, with the host the link goes to. */
export interface ClientDocument {
  label: string;
  href: string;
  host: string;
}

/**
 * The application's privacy policy and terms of service as the pages link them, each with its
 * host: an application that registered itself may point them anywhere, so the page says where,
 * as it does for its website.
 */
export function clientDocuments(display: ClientDisplay): ClientDocument[] {
  const linked: Array<[string, string | undefined]> = [['Privacy policy', display.policyUri], ['Terms of service', display.tosUri]];
  return linked.flatMap(([label, href]) => {
    const url = href === undefined ? undefined : URL.parse(href);
    return url ? [{ label, href: url.href, host: url.host }] : [];
  });
}

function webUrl(value: unknown): URL | undefined {
  if (typeof value !== 'string') return undefined;
  const url = URL.parse(value);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:')) return undefined;
  if (url.username || url.password) return undefined;
  return url;
}
