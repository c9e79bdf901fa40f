/**
 * RFC 6749 sections 4.1.2.1 and 5.2, and RFC 6750 section 3: an `error_description` holds only
 * %x20-21 / %x23-5B / %x5D-7E, printable ASCII without `"` and `\`. A client that checks it (the
 * OpenID conformance suite does, and a library that puts the text in a quoted challenge) fails on
 * anything else, and a refusal often echoes what was sent: a redirect URI or a scope in any
 * script, a quote, a line break.
 */
const OUTSIDE_CHARSET = /[^\x20\x21\x23-\x5B\x5D-\x7E]/gu;

/** Whether `text` may be sent as an `error_description` as it is. */
export function isErrorDescriptionCharset(text: string): boolean {
  return text.search(OUTSIDE_CHARSET) === -1;
}

/**
 * `text` as an `error_description` may carry it: every character outside the charset written as
 * the percent-encoded bytes of its UTF-8 (`é` as `%C3%A9`, `"` as `%22`), as a URI would carry
 * it, so that what was echoed can still be read back. A lone surrogate becomes U+FFFD's bytes.
 */
export function inErrorDescriptionCharset(text: string): string {
  if (isErrorDescriptionCharset(text)) return text;
  return text.replace(OUTSIDE_CHARSET, (character) => {
    let encoded = '';
    for (const byte of Buffer.from(character, 'utf8')) encoded += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    return encoded;
  });
}

/**
 * What the engine's refusals that carry no `error_description` of their own say: a client is told
 * what to do about each, as about every other refusal.
 */
const UNDESCRIBED: Readonly<Record<string, string>> = {
  request_uri_not_supported: 'request_uri is taken only at the authorization endpoint, as the urn:ietf:params:oauth:request_uri: value the pushed '
    + 'authorization request endpoint answered (RFC 9126); push the parameters themselves, or send a request object by value (request)',
  request_not_supported: 'request objects are not taken here; send the parameters themselves',
  registration_not_supported: 'the registration parameter is not supported; register the client first (POST /oauth/register, RFC 7591)',
};

/** The `error_description` to answer an error `code` with: `description` in the charset, or what UNDESCRIBED says of the code. */
export function errorDescriptionFor(code: string, description: string | undefined): string | undefined {
  return description === undefined ? UNDESCRIBED[code] : inErrorDescriptionCharset(description);
}
