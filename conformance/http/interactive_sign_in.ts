import { forms, linkTargets, type HtmlForm } from './html.ts';
import type { HttpResponse } from './http_client.ts';
import { followRedirects, type Landing, type UserAgent } from './user_agent.ts';

export interface Credentials {
  email: string;
  password: string;
  /**
   * Set once the OP has refused these credentials: from then on no module submits them again,
   * so a mistyped password cannot lock the operator's account out with a burst of failed sign-ins.
   */
  refused?: boolean;
}

export class SignInRefused extends Error {
  override name = 'SignInRefused';
}

/** A login or consent page the user agent passed through on its way. */
export interface InteractionPage {
  kind: 'login' | 'consent';
  url: string;
  html: string;
}

export interface Journey {
  landing: Landing;
  pages: InteractionPage[];
}

export interface JourneyOptions {
  /** Stop on the first login page instead of signing in (its HTML is what the module checks). */
  stopAtLogin?: boolean;
  /**
   * The client's redirect URI. An OP may show a page with a link back there instead of sending an
   * error answer to a client it has not vetted (RFC 9700 section 4.11.2); the user follows it.
   */
  returnTo?: string;
  /** Deny on the consent page instead of allowing (the user rejecting the request). */
  deny?: boolean;
}

const MAX_INTERACTIONS = 6;

/**
 * Plays the user: from the first response of an authorization request, signs in on the login
 * form and allows on the consent form, as the server serves them (fields csrf, email, password,
 * workspace, decision=allow), until the OP sends the browser back to the client or shows a page
 * that is neither (an error page).
 */
export async function playUser(agent: UserAgent, first: HttpResponse, opOrigin: string, credentials: Credentials, options: JourneyOptions = {}): Promise<Journey> {
  const pages: InteractionPage[] = [];
  let landing = await followRedirects(agent, first, opOrigin);
  for (let step = 0; step < MAX_INTERACTIONS && landing.kind === 'page'; step += 1) {
    const html = landing.response.text;
    const form = interactionForm(html);
    if (!form) break;
    const signedInBefore = pages.some((page) => page.kind === 'login');
    pages.push({ kind: form.kind, url: landing.url, html });
    if (form.kind === 'login' && options.stopAtLogin) break;
    if (form.kind === 'login' && (signedInBefore || credentials.refused)) {
      credentials.refused = true;
      throw new SignInRefused(`the OP's login page refused ${credentials.email} (it showed the login form again after the sign-in); check --email and --password`);
    }
    const answer = form.kind === 'login' ? loginAnswer(form.form, credentials) : consentAnswer(form.form, options.deny ? 'deny' : 'allow');
    const posted = await agent.request(new URL(form.form.action || landing.url, landing.url).href, { method: 'POST', form: answer });
    landing = await followRedirects(agent, posted, opOrigin);
  }
  if (landing.kind === 'page' && options.returnTo) landing = wayBack(landing.response.text, options.returnTo) ?? landing;
  return { landing, pages };
}

/**
 * A page's way back to the client, as the suite's browser takes it: a form posting there, which
 * the page submits by itself (response_mode=form_post) or the user submits; or a link there,
 * which the user follows.
 */
function wayBack(html: string, redirectUri: string): Landing | undefined {
  const form = forms(html).find((candidate) => candidate.method === 'POST' && candidate.action.startsWith(redirectUri));
  if (form) return { kind: 'redirect', url: new URL(form.action), posted: submittedValues(form) };
  const href = linkTargets(html).find((target) => target.startsWith(redirectUri));
  return href ? { kind: 'redirect', url: new URL(href) } : undefined;
}

function interactionForm(html: string): { kind: InteractionPage['kind']; form: HtmlForm } | undefined {
  for (const form of forms(html)) {
    if (form.method !== 'POST') continue;
    if (form.fields.some((field) => field.type === 'password')) return { kind: 'login', form };
    if (form.fields.some((field) => field.name === 'decision' && field.value === 'allow')) return { kind: 'consent', form };
  }
  return undefined;
}

/** What a browser submits: hidden fields, checked choices, and the user's own entries. */
function submittedValues(form: HtmlForm): Record<string, string> {
  const values: Record<string, string> = {};
  for (const field of form.fields) {
    if (field.type === 'submit' || field.type === 'button') continue;
    if ((field.type === 'radio' || field.type === 'checkbox') && !field.checked) continue;
    if (!(field.name in values)) values[field.name] = field.value;
  }
  return values;
}

function loginAnswer(form: HtmlForm, credentials: Credentials): Record<string, string> {
  const values = submittedValues(form);
  const emailField = form.fields.find((field) => field.type === 'email' || field.name === 'email')?.name ?? 'email';
  const passwordField = form.fields.find((field) => field.type === 'password')!.name;
  return { ...values, [emailField]: credentials.email, [passwordField]: credentials.password };
}

function consentAnswer(form: HtmlForm, decision: 'allow' | 'deny'): Record<string, string> {
  const values = submittedValues(form);
  // A workspace choice with none checked: the first one offered, as a user would pick.
  const workspace = form.fields.find((field) => field.name === 'workspace');
  if (workspace && !('workspace' in values)) values.workspace = workspace.value;
  return { ...values, decision };
}
