/**
 * The one error a request is refused with: its status, an error code (RFC 6749 style, or the data
 * API's), a sentence for the developer or the person reading, and headers the answer must carry
 * (`Retry-After`, `WWW-Authenticate`, `Allow`). Thrown anywhere below the HTTP host; the host's one
 * error middleware (src/http/errors.ts) writes it in the format of the endpoint that threw it:
 * OAuth JSON, data API JSON, or the error page.
 */
export class HttpError extends Error {
  override name = 'HttpError';
  readonly status: number;
  readonly code: string;
  readonly headers: Readonly<Record<string, string>>;

  constructor(status: number, code: string, description: string, headers: Record<string, string> = {}) {
    super(description);
    this.status = status;
    this.code = code;
    this.headers = headers;
  }

  /** The sentence answered as `error_description`. */
  get description(): string {
    return this.message;
  }
}

export const notFound = (description: string) => new HttpError(404, 'not_found', description);
export const invalidRequest = (description: string) => new HttpError(400, 'invalid_request', description);

/**
 * The status to refuse a body a body parser could not read with: the parser's own 4xx (too large,
 * cut short, an unknown encoding), or 400 for one whose errors carry no status (a body that is not
 * what its Content-Encoding says, JSON that does not parse). Undefined for the server's own
 * failure (a 5xx), to be answered as one.
 */
export function unreadableBodyStatus(error: unknown): number | undefined {
  const status = (error as { status?: unknown } | null)?.status;
  if (typeof status !== 'number') return 400;
  return status >= 400 && status < 500 ? status : undefined;
}
