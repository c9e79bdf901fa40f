/** oidc-provider reads at most 56 KiB of a request body (lib/shared/selective_body.js); the host uses the same limit. */
export const ENGINE_BODY_LIMIT = 56 * 1024;
