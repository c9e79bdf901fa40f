import { expect } from 'chai';

/** An OAuth error answer (RFC 6749 5.2 shape): the status, the `error` code and an `error_description`; the body, for more checks. */
export async function expectOAuthError(response: Response, status: number, error: string): Promise<Record<string, unknown>> {
  const body = await response.json() as Record<string, unknown>;
  expect(response.status, JSON.stringify(body)).to.equal(status);
  expect(body.error).to.equal(error);
  expect(body.error_description).to.be.a('string');
  return body;
}
