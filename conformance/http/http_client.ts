import { ExchangeLog, keptResponseHeaders, maskedBody, maskedHeaders, truncated } from './exchange_log.ts';

export interface HttpRequest {
  method?: string;
  url: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface HttpResponse {
  status: number;
  headers: Headers;
  text: string;
  url: string;
  /** The parsed body when it is JSON, otherwise undefined. */
  json: unknown;
}

const TIMEOUT_MS = 15_000;

/** fetch without following redirects, every exchange recorded in the module's log. */
export class HttpClient {
  readonly log: ExchangeLog;

  constructor(log: ExchangeLog) {
    this.log = log;
  }

  async send(request: HttpRequest): Promise<HttpResponse> {
    const method = request.method ?? (request.body === undefined ? 'GET' : 'POST');
    const headers = request.headers ?? {};
    const recorded = {
      method,
      url: request.url,
      headers: maskedHeaders(headers),
      body: maskedBody(request.body, headers['content-type']),
    };
    let response: Response;
    try {
      response = await fetch(request.url, { method, headers, body: request.body, redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
    } catch (error) {
      const message = error instanceof Error ? `${error.message}${error.cause instanceof Error ? `: ${error.cause.message}` : ''}` : String(error);
      this.log.add({ request: recorded, error: message });
      throw new Error(`${method} ${request.url} failed: ${message}`);
    }
    const text = await response.text();
    this.log.add({ request: recorded, response: { status: response.status, headers: keptResponseHeaders(response.headers), body: truncated(text) } });
    return { status: response.status, headers: response.headers, text, url: request.url, json: parseJson(text) };
  }

  /** POST application/x-www-form-urlencoded. */
  postForm(url: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<HttpResponse> {
    return this.send({
      method: 'POST',
      url,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', ...headers },
      body: new URLSearchParams(form).toString(),
    });
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The body as a JSON object, or undefined when it is not one. */
export function jsonObject(response: HttpResponse): Record<string, unknown> | undefined {
  const { json } = response;
  return json !== null && typeof json === 'object' && !Array.isArray(json) ? json as Record<string, unknown> : undefined;
}

/** The media type of a response, without parameters. */
export function mediaType(response: HttpResponse): string | undefined {
  return response.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase();
}
