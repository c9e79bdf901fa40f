import { hash } from 'node:crypto';

/** The Content-Security-Policy of the pages the service renders (src/pages/render.ts). */

export interface HtmlPolicy {
  /** Extra `form-action` sources: where a form's redirects may lead (the client's redirect URI). */
  formAction?: string[];
  /**
   * The origins the page may load images from (the client's logo, the service's), as `cspOrigin`
   * gives them. Without any the page loads no image at all.
   */
  imgSrc?: readonly string[];
  /**
   * The one script file the page may load, as a full URL (the settings area's script), as
   * SCRIPT_URL checks it. Without it the page loads no script file.
   */
  scriptSrc?: string;
  /**
   * The one inline script the page runs, allowed by its SHA-256 alone (the self-submitting form's,
   * src/pages/auto_post.ts): text fixed in the code, never built from a request.
   */
  inlineScript?: string;
}

/**
 * An http(s) origin that is safe to write into a policy as a source: scheme, host (letters,
 * digits, `-`, `_`, dots, or a bracketed IPv6 address) and port, nothing else. The URL parser
 * lets through hosts such as `a;b` (`http://a%3bb/`), which would end the directive and start
 * another; those are refused.
 */
const CSP_ORIGIN = /^https?:\/\/(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?$/;

/** The origin of an http(s) URL as a policy source, or undefined when it cannot be written safely. */
export function cspOrigin(url: URL): string | undefined {
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  return CSP_ORIGIN.test(url.origin) ? url.origin : undefined;
}

/**
 * The policy for a rendered page: its own inline style only, forms posting to us (and
 * redirecting to the client), and images from the origins of the logos the page shows.
 */
export function htmlContentSecurityPolicy(nonce: string, policy: HtmlPolicy = {}): string {
  const formAction = ["'self'", ...(policy.formAction ?? [])].join(' ');
  const images = [...new Set(policy.imgSrc ?? [])];
  for (const origin of images) if (!CSP_ORIGIN.test(origin)) throw new Error(`not an origin a policy may name: ${origin}`);
  const imgSrc = images.length ? `; img-src ${images.join(' ')}` : '';
  if (policy.scriptSrc !== undefined && !SCRIPT_URL.test(policy.scriptSrc)) throw new Error(`not a script URL a policy may name: ${policy.scriptSrc}`);
  const scripts = [
    ...(policy.scriptSrc ? [policy.scriptSrc] : []),
    ...(policy.inlineScript ? [`'sha256-${hash('sha256', policy.inlineScript, 'base64')}'`] : []),
  ];
  const scriptSrc = scripts.length ? `; script-src ${scripts.join(' ')}` : '';
  return `default-src 'none'; style-src 'nonce-${nonce}'${imgSrc}${scriptSrc}; form-action ${formAction}; frame-ancestors 'none'; base-uri 'none'`;
}

/** A source naming one file: an origin as CSP_ORIGIN allows, then path segments of unreserved characters only. */
const SCRIPT_URL = new RegExp(`^${CSP_ORIGIN.source.slice(1, -1)}(?:/[A-Za-z0-9._~-]+)+$`);
