/**
 * A data API request refused with a 4xx: the status, an error code and a sentence for the
 * developer, answered as JSON `{ error, error_description }` like the OAuth endpoints' errors.
 */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  readonly code: string;
  readonly headers: Record<string, string>;

  constructor(status: number, code: string, description: string, headers: Record<string, string> = {}) {
    super(description);
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

export const notFound = (description: string) => new ApiError(404, 'not_found', description);
export const invalidRequest = (description: string) => new ApiError(400, 'invalid_request', description);
